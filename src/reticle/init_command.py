"""Init.

`reticle init`: find the app in the current directory, add the dev-only script
tag where that is safe (else print the exact snippet), write the MCP client
configuration of Claude Code (.mcp.json), Cursor (.cursor/mcp.json), VS Code
(.vscode/mcp.json, "servers") and Codex ($CODEX_HOME/config.toml, default
~/.codex: Codex reads MCP servers from the user's config), merging and never
clobbering another server.  The app's store, where init finds it (init_stores),
goes into the project's MCP configurations as the server's env RETICLE_WATCH_DB.
Planning is pure (_init_plan); writing is small.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .constants import DEFAULT_PORT
from .control import _self_command
from .init_stores import _find_stores, _has_password, _mask_url, _store_lines, _StoreFinding
from .util import _dumps, _parse_float, _reject_constant, _short


_SERVER_NAME = "reticle"
_WATCH_ENV = "RETICLE_WATCH_DB"  # the stores the daemon watches, URLs separated by whitespace
_TEMPLATE_DIRS = ("templates",)


class _InitChange:
    """One file init would write: its path, old text (None when new), new text, and why."""

    __slots__ = ("path", "old", "new", "what")

    def __init__(self, path: str, old: Optional[str], new: str, what: str) -> None:
        self.path = path
        self.old = old
        if old and old.count("\r\n") * 2 > old.count("\n"):
            new = re.sub(r"(?<!\r)\n", "\r\n", new)  # a CRLF file keeps CRLF in the lines init adds
        self.new = new
        self.what = what


def _outside_project(root: str, path: str) -> Optional[str]:
    """Why init must not write `path` (a symbolic link on the way from `root`, dangling or not, or a
    real path outside `root`), or None.  init writes into the project and nowhere else."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return "%s is outside the project" % path
    current = os.path.abspath(root)
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            return "%s is a symbolic link (to %s)" % (current, os.readlink(current))
    real_root = os.path.realpath(root)
    if os.path.commonpath([os.path.realpath(path), real_root]) != real_root:
        return "%s resolves outside the project" % path
    return None


INIT_MAX_BYTES = 2 << 20  # a project or config file init reads; a larger one is skipped and named


def _special_kind(mode: int) -> str:
    import stat
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _read_file_text(path: str, skipped: Optional[List[str]] = None) -> Optional[str]:
    """The text of a regular file of at most INIT_MAX_BYTES, its line endings as they are, or None.
    It is opened without blocking (a FIFO named settings.py never hangs init) and checked with
    fstat; a special or oversized file is skipped and named in `skipped`."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            if skipped is not None:
                skipped.append("%s is %s, not a regular file; skipped" % (path, _special_kind(info.st_mode)))
            return None
        if info.st_size > INIT_MAX_BYTES:
            if skipped is not None:
                skipped.append("%s is %d bytes, over the %d init reads; skipped" % (path, info.st_size, INIT_MAX_BYTES))
            return None
        data = b""
        while len(data) <= INIT_MAX_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
        if len(data) > INIT_MAX_BYTES:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _package_deps(root: str, skipped: Optional[List[str]] = None) -> Dict[str, str]:
    text = _read_file_text(os.path.join(root, "package.json"), skipped)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    deps: Dict[str, str] = {}
    for key in ("dependencies", "devDependencies"):
        if isinstance(data.get(key), dict):
            deps.update(data[key])
    return deps


def _find_template(root: str, skipped: Optional[List[str]] = None) -> Optional[str]:
    """The base template of a Django or Flask app: base.html/layout.html first, else the only
    template with a </head>."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in ("node_modules", "venv", ".venv",
                                                                                 "site-packages", "static")]
        if os.path.basename(dirpath) not in _TEMPLATE_DIRS and "/templates/" not in dirpath + "/":
            continue
        for f in sorted(filenames):
            if f.endswith(".html"):
                path = os.path.join(dirpath, f)
                if "</head>" in (_read_file_text(path, skipped) or "").lower():
                    found.append(path)
    for preferred in ("base.html", "layout.html", "_base.html"):
        for path in found:
            if os.path.basename(path) == preferred:
                return path
    return found[0] if len(found) == 1 else None


def _python_deps(root: str, skipped: Optional[List[str]] = None) -> Dict[str, str]:
    """The Python web frameworks the project's dependency files name: module -> the file (pyproject.toml,
    a requirements*.txt, Pipfile, setup.cfg or setup.py), read as text; `flask-login` is not `flask`."""
    names = ["pyproject.toml", "Pipfile", "setup.cfg", "setup.py"]
    try:
        names += sorted(f for f in os.listdir(root) if re.fullmatch(r"requirements[\w.-]*\.(txt|in)", f))
    except OSError:
        pass
    found: Dict[str, str] = {}
    for name in names:
        text = re.sub(r"(?m)(^|\s)#.*$", "", _read_file_text(os.path.join(root, name), skipped) or "")
        for module in ("flask",) + tuple(m for m, _ in _ASGI_FRAMEWORKS):
            # a requirement: at a line's start or opening a string or list item, then extras, a specifier or its end
            if module not in found and re.search(r"(?:^\s*|[\"'\[,]\s*)%s(?:\[[^\]\n]*\])?\s*(?:[<>=~!;,\"'@\]]|$)"
                                                 % module, text, re.M | re.I):
                found[module] = name
    return found


_PY_APP_FILES = ("app.py", "main.py", "wsgi.py", "asgi.py", "application.py", "server.py",
                 os.path.join("app", "main.py"), os.path.join("app", "__init__.py"), os.path.join("app", "app.py"))
_PY_SKIP_DIRS = ("node_modules", "venv", ".venv", "env", "site-packages", "__pycache__", "migrations", "tests",
                 "test", "dist", "build", "static", "templates")
_PY_FILES_MAX = 400  # Python files read when looking for the module that imports the framework


def _python_files(root: str) -> List[str]:
    """The project's Python files, the usual app modules first, then the rest within three folders
    of `root` (at most _PY_FILES_MAX; virtualenvs, tests and migrations left out)."""
    files = [os.path.join(root, name) for name in _PY_APP_FILES]
    for dirpath, dirnames, filenames in os.walk(root):
        depth = os.path.relpath(dirpath, root).count(os.sep) + (dirpath != root)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _PY_SKIP_DIRS) \
            if depth < 3 else []
        files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
        if len(files) > _PY_FILES_MAX:
            break
    return list(dict.fromkeys(files))[:_PY_FILES_MAX]


def _python_app(root: str, skipped: Optional[List[str]] = None) -> Optional[dict]:
    """-> {kind, why, module?}: a Flask app, or an ASGI app `reticle.asgi` wraps (FastAPI, Litestar,
    Starlette, Quart), found by the module that imports the framework or, failing that, by the project's
    dependency files; None when neither names one."""
    frameworks = (("flask", "Flask"),) + _ASGI_FRAMEWORKS
    texts = [(path, _read_file_text(path, skipped) or "") for path in _python_files(root) if os.path.isfile(path)]
    for module, kind in frameworks:
        pattern = re.compile(r"^\s*(from %s(\.\w+)* import|import %s\b)" % (module, module), re.M)
        for path, text in texts:
            if pattern.search(text):
                rel = os.path.relpath(path, root)
                return {"kind": kind, "why": "%s imported in %s" % (module, rel), "module": rel}
    declared = _python_deps(root, skipped)
    for module, kind in frameworks:
        if module in declared:
            return {"kind": kind, "why": "%s in %s" % (module, declared[module])}
    return None


def _detect_app(root: str, skipped: Optional[List[str]] = None) -> dict:
    """-> {kind, entry?, why, module?, server?}: the app in `root` and the HTML file the tag goes into.
    A framework that renders its own documents (Next.js, React Router, Astro, SvelteKit ...) wins over
    the vite it runs on; a Node server (Hono, Express ...) over vite when no index.html is there; a Vite
    page with a Python API beside it is Vite, its Python framework kept as `server`."""
    deps = _package_deps(root, skipped)
    index = os.path.join(root, "index.html")
    has_index = os.path.isfile(index)
    pages = next(((dep, kind) for dep, kind in _PAGE_FRAMEWORKS if dep in deps), None)
    if pages is None and any(os.path.isfile(os.path.join(root, "react-router.config." + e))
                             for e in ("ts", "js", "mts", "mjs")):
        pages = ("@react-router/dev", "React Router 7")
    if pages is not None:
        dep, kind = pages
        why = "%s in package.json%s" % (dep, " (framework mode)" if kind == "React Router 7" else "")
        entry = os.path.join(root, "public", "index.html") if kind == "Create React App" else None
        return {"kind": kind, "entry": entry if entry and os.path.isfile(entry) else None, "why": why}
    vite = "vite" in deps or any(os.path.isfile(os.path.join(root, "vite.config." + e))
                                 for e in ("js", "ts", "mjs", "mts"))
    python = None if os.path.isfile(os.path.join(root, "manage.py")) else _python_app(root, skipped)
    if vite and has_index:  # a Vite page; a Python framework beside it is its API server
        app = {"kind": "Vite", "entry": index, "why": "vite in package.json"}
        return dict(app, server=python["kind"], module=python.get("module")) if python else app
    if os.path.isfile(os.path.join(root, "manage.py")):
        return {"kind": "Django", "entry": _find_template(root, skipped), "why": "manage.py"}
    if python is not None:
        return dict(python, entry=_find_template(root, skipped))
    node = next(((dep, kind) for dep, kind in _NODE_FRAMEWORKS if dep in deps), None)
    if node is not None:  # a server that renders its own HTML: the tag goes into its layout, printed
        return {"kind": node[1], "why": "%s in package.json" % node[0], "vite": vite}
    if vite:
        return {"kind": "Vite", "entry": None, "why": "vite in package.json"}
    if os.path.isfile(os.path.join(root, "package.json")) and not has_index:  # plain page + tooling stays plain
        return {"kind": "Node", "why": "package.json"}
    if has_index:
        return {"kind": "plain HTML", "entry": index, "why": "index.html"}
    return {"kind": "unknown", "why": "no package.json, manage.py, Flask or ASGI app, or index.html here"}


# ASGI frameworks whose app `reticle.asgi` wraps unchanged: the import that names each
_ASGI_FRAMEWORKS = (("fastapi", "FastAPI"), ("litestar", "Litestar"), ("starlette", "Starlette"), ("quart", "Quart"))
# Node frameworks that render every page's document themselves, on vite or not: the tag goes into their layout
_PAGE_FRAMEWORKS = (("next", "Next.js"), ("@react-router/dev", "React Router 7"), ("@remix-run/dev", "Remix"),
                    ("react-scripts", "Create React App"), ("astro", "Astro"), ("nuxt", "Nuxt"),
                    ("@sveltejs/kit", "SvelteKit"))
# Node servers that render their own pages (no index.html to edit), by their package
_NODE_FRAMEWORKS = (("hono", "Hono"), ("express", "Express"), ("fastify", "Fastify"), ("koa", "Koa"),
                    ("@nestjs/core", "NestJS"))
_SERVER_KINDS = [kind for _, kind in _NODE_FRAMEWORKS] + ["Node"]


def _dev_snippet(kind: str, origin: str, vite: bool = False) -> str:
    """The dev-only tag for each kind of app: it loads the SDK in development only (`vite`: a Node server
    whose code Vite serves, where import.meta.env.DEV is defined)."""
    src = origin + "/reticle.js"
    loader = ("var s=document.createElement('script');s.src=%s;document.head.appendChild(s);" % json.dumps(src))
    if kind == "Vite":
        return '<script type="module">if (import.meta.env.DEV) { %s }</script>' % loader
    if kind == "Create React App":
        return "<script>if ('%%NODE_ENV%%' === 'development') { %s }</script>" % loader
    if kind == "Django":
        return '{%% if debug %%}<script src="%s"></script>{%% endif %%}' % src
    if kind == "Flask":
        return '{%% if config.DEBUG %%}<script src="%s"></script>{%% endif %%}' % src
    if kind == "Next.js":
        return ("{process.env.NODE_ENV === 'development' && <Script src=\"%s\" strategy=\"beforeInteractive\" />}"
                % src)
    if kind in ("React Router 7", "Remix") or (kind == "Hono" and vite):
        return "{import.meta.env.DEV && <script src=\"%s\"></script>}" % src
    if kind == "Hono":  # hono/jsx escapes a script's text, so the tag loads by src
        return "{process.env.NODE_ENV !== 'production' && <script src=\"%s\"></script>}" % src
    if kind == "Astro":  # is:inline: Astro leaves the tag as written instead of bundling what it loads
        return "{import.meta.env.DEV && <script is:inline src=\"%s\"></script>}" % src
    if kind == "Nuxt":  # an environment override of defineNuxtConfig: development only
        return "$development: { app: { head: { script: [{ src: \"%s\" }] } } }" % src
    return ("<script>if (/^(localhost|127\\.0\\.0\\.1|\\[::1\\])$/.test(location.hostname)) { %s }</script>"
            % loader)


def _csp_allows(sources: List[str], url: str) -> bool:
    """Whether a CSP source list admits `url` (the daemon's http:// or ws:// origin) from a page
    served over http: `*` (not for ws: in older browsers, but CSP3 allows it), a scheme source,
    a host source with or without scheme and port (`:*` too)."""
    parts = urllib.parse.urlsplit(url)
    scheme, host, port = parts.scheme, (parts.hostname or "").lower(), parts.port
    for raw in sources:
        src = raw.strip().lower()
        if src == "*" or src == scheme + ":" or (scheme == "ws" and src in ("ws:", "wss:")):
            return True
        m = re.fullmatch(r"(?:([a-z][a-z0-9+.-]*)://)?(\*\.)?([a-z0-9.\-\[\]:]+?)(?::(\d+|\*))?(/.*)?", src)
        if not m or src.startswith("'"):
            continue
        s_scheme, wild, s_host, s_port = m.group(1), m.group(2), m.group(3), m.group(4)
        if s_scheme and s_scheme != scheme and not (scheme == "ws" and s_scheme in ("http", "wss")) and not (
                scheme == "http" and s_scheme == "https"):
            continue
        if wild:
            if not host.endswith("." + s_host):
                continue
        elif s_host != host:
            continue
        if s_port == "*" or (s_port and port is not None and int(s_port) == port):
            return True
        if s_port is None and port in (None, 80):
            return True
    return False


def _csp_warnings(texts: Dict[str, str], origin: str) -> List[str]:
    """A Content-Security-Policy found in the app's files that would block the script or its
    WebSocket."""
    out = []
    ws = "ws" + origin[4:]
    for path, text in texts.items():
        # a policy quotes its keywords ('self'): the value runs to the quote that opened it
        policies = [m.group(2) for m in re.finditer(
            r'http-equiv=["\']Content-Security-Policy["\'][^>]*?content=(["\'])(.*?)\1', text, re.I | re.S)]
        policies += [m.group(2) for m in re.finditer(
            r'Content-Security-Policy["\']?\s*[:,]\s*(["\'])(.*?)\1', text, re.I | re.S)]
        for policy in policies:
            directives = {}
            for part in policy.split(";"):
                bits = part.split()
                if bits:
                    directives[bits[0].lower()] = bits[1:]
            script = directives.get("script-src-elem", directives.get("script-src", directives.get("default-src")))
            connect = directives.get("connect-src", directives.get("default-src"))
            if script is not None and not _csp_allows(script, origin):
                out.append("%s: its Content-Security-Policy script-src does not allow %s; add it in development"
                           % (path, origin))
            if script is not None and "'unsafe-inline'" not in [x.lower() for x in script]:
                out.append("%s: its Content-Security-Policy script-src has no 'unsafe-inline', so an inline loader "
                           "is blocked: use <script src=\"%s/reticle.js\"></script> in development instead"
                           % (path, origin))
            if connect is not None and not _csp_allows(connect, ws):
                out.append("%s: its Content-Security-Policy connect-src does not allow %s (the SDK's WebSocket); "
                           "add it in development" % (path, ws))
        if not policies and re.search(r"\bCSP_[A-Z_]+\s*=|Content-Security-Policy", text):
            out.append("%s sets a Content-Security-Policy: make sure script-src allows %s and connect-src "
                       "allows %s in development" % (path, origin, ws))
    return out


def _merge_json_server(path: str, key: str, entry: dict, skipped: Optional[List[str]] = None
                       ) -> Tuple[Optional[_InitChange], str]:
    """The change that adds Reticle's MCP server entry under `key` of one JSON client config, or
    (None, a note saying why not): an unreadable file, one that is not strict JSON (duplicate keys,
    1e999) or not an object is left alone, and an entry already there is kept as it is, but for the
    watch (env RETICLE_WATCH_DB) added when it has none."""
    old = _read_file_text(path, skipped)
    if old is None and os.path.lexists(path):
        return None, "%s is not readable; add %s by hand: %s" % (path, key, _dumps({key: {_SERVER_NAME: entry}}))
    def no_duplicates(pairs: List[Tuple[str, Any]]) -> dict:
        seen: Dict[str, Any] = {}
        for k, v in pairs:
            if k in seen:
                raise ValueError("the key %r appears twice" % k)
            seen[k] = v
        return seen
    try:
        # strict: 1e999 would come back as Infinity (not JSON), a duplicate key would lose a block
        data = json.loads(old, object_pairs_hook=no_duplicates, parse_constant=_reject_constant,
                          parse_float=_parse_float) if old and old.strip() else {}
    except (ValueError, RecursionError) as exc:
        return None, "%s is not valid strict JSON (%s); left alone. Add under %r: %s" % (
            path, _short(str(exc), 120), key, _dumps({_SERVER_NAME: entry}))
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        return None, "%s has an unexpected shape; left alone" % path
    servers = data.get(key, {})
    watch = (entry.get("env") or {}).get(_WATCH_ENV)
    if _SERVER_NAME in servers:
        updated, note = _entry_with_watch(servers[_SERVER_NAME], entry)
        if updated is None:
            return None, "%s: %s already has a %r server%s" % (path, key, _SERVER_NAME, note)
        what = "added %s to the %r MCP server's env" % (_WATCH_ENV, _SERVER_NAME)
    else:
        updated = entry
        what = "added the %r MCP server under %r%s" % (_SERVER_NAME, key, " with %s in its env" % _WATCH_ENV
                                                        if watch else "")
    data[key] = dict(servers, **{_SERVER_NAME: updated})
    new = json.dumps(data, indent=2) + "\n"
    return _InitChange(path, old, new, what), ""


def _entry_with_watch(existing: Any, entry: dict) -> Tuple[Optional[dict], str]:
    """An existing `reticle` entry with the watch init found added to its env, when it has none (the
    rest of the entry kept as it is); else (None, the end of the note that says it was kept).  A watch
    the user wrote is never replaced: the note names both, passwords masked."""
    watch = (entry.get("env") or {}).get(_WATCH_ENV)
    if existing == entry:
        return None, ""
    env = existing.get("env", {}) if isinstance(existing, dict) else None
    if not watch or not isinstance(env, dict):
        return None, " (kept as it is)"
    have = env.get(_WATCH_ENV)
    if have == watch:
        return None, " (kept as it is; it watches what init found)"
    if have:
        shown = " ".join(_mask_url(u) for u in str(have).split())
        return None, " (kept as it is: it watches %s; init found %s)" % (
            shown, " ".join(_mask_url(u) for u in watch.split()))
    return dict(existing, env=dict(env, **{_WATCH_ENV: watch})), ""


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string of printable text is a TOML basic string


def _toml_has_server(text: str) -> Optional[bool]:
    """Whether Codex's TOML already names the server, in any form ([mcp_servers.reticle], a dotted
    `mcp_servers.reticle.command = ...`, or `reticle = {...}` under [mcp_servers]); None when the
    file is not valid TOML (checked where tomllib exists, Python 3.11+)."""
    try:
        import tomllib  # Python 3.11+: where it is missing, the forms below are matched by pattern
    except ImportError:
        tomllib = None  # type: ignore[assignment]  # Python 3.9 and 3.10 have no tomllib
    if tomllib is not None:
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError):
            return None
        servers = data.get("mcp_servers")
        return isinstance(servers, dict) and _SERVER_NAME in servers
    name = r"[\"']?%s[\"']?" % _SERVER_NAME
    if re.search(r"^\s*\[\s*mcp_servers\s*\.\s*%s\s*[\].]" % name, text, re.M):
        return True
    if re.search(r"^\s*mcp_servers\s*\.\s*%s\s*[.=]" % name, text, re.M):
        return True
    table = re.search(r"^\s*\[\s*mcp_servers\s*\]\s*$(.*?)(?=^\s*\[|\Z)", text, re.M | re.S)
    return bool(table and re.search(r"^\s*%s\s*[.=]" % name, table.group(1), re.M))


def _toml_inline_end(text: str, start: int) -> Optional[int]:
    """The index of the `}` that closes the inline table opening at text[start] ("{"), skipping
    strings (basic, literal, multi-line) and nested tables and arrays; None when it never closes."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith(('"""', "'''"), i):
            quote = text[i:i + 3]
            close = text.find(quote, i + 3)
            while quote == '"""' and close > 0 and text[close - 1] == "\\":
                close = text.find(quote, close + 1)
            if close < 0:
                return None
            i = close + 3
            continue
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < len(text) and text[j] != ch and text[j] != "\n":
                j += 2 if ch == '"' and text[j] == "\\" else 1
            i = j + 1
            continue
        if ch == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i if ch == "}" else None
        i += 1
    return None


def _toml_with_server(text: str, command: List[str]) -> str:
    """`text` with Reticle's server added in the form the file already uses: into an inline
    `mcp_servers = { ... }` at the top level (a [mcp_servers.reticle] table after it would declare
    the closed table twice), else as a [mcp_servers.reticle] table at the end (valid beside
    [mcp_servers.x] tables, dotted `mcp_servers.x.y = ...` keys and `x = {...}` under [mcp_servers])."""
    args = ", ".join(_toml_str(a) for a in command[1:])
    top = re.split(r"^\s*\[", text, maxsplit=1, flags=re.M)[0]  # the root table: before the first header
    inline = re.search(r"^[ \t]*mcp_servers[ \t]*=[ \t]*\{", top, re.M)
    if inline is not None:
        end = _toml_inline_end(text, inline.end() - 1)
        if end is not None:
            inner = text[inline.end():end].rstrip()
            entry = "%s = { command = %s, args = [%s] }" % (_SERVER_NAME, _toml_str(command[0]), args)
            cut = inline.end() + len(inner)
            return text[:cut] + (", " if inner.strip() else " ") + entry + " " + text[end:].lstrip(" \t")
    block = "[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n" % (_SERVER_NAME, _toml_str(command[0]), args)
    flat = text.replace("\r\n", "\n")
    sep = "" if not text or flat.endswith("\n\n") else ("\n" if flat.endswith("\n") else "\n\n")
    return text + sep + block


def _merge_codex(path: str, command: List[str], skipped: Optional[List[str]] = None
                 ) -> Tuple[Optional[_InitChange], str]:
    """The change that adds Reticle's server to Codex's config.toml, or (None, why not): a file that
    is not a regular file, not valid TOML or already names the server is left alone, and so is
    one the addition would not keep valid (checked by parsing the result where tomllib exists)."""
    old = _read_file_text(path, skipped)
    if old is None and os.path.lexists(path):
        return None, "%s is not readable as a regular text file; left alone" % path
    text = old or ""
    has = _toml_has_server(text)
    if has is None:
        return None, "%s is not valid TOML; left alone. Add: [mcp_servers.%s] command = %s" % (
            path, _SERVER_NAME, _toml_str(command[0]))
    if has:
        return None, "%s already has [mcp_servers.%s]" % (path, _SERVER_NAME)
    new = _toml_with_server(text, command)
    if _toml_has_server(new) is None:
        return None, "%s: adding [mcp_servers.%s] would not keep it valid TOML; left alone. Add by hand: " \
                     "%s = { command = %s }" % (path, _SERVER_NAME, _SERVER_NAME, _toml_str(command[0]))
    return _InitChange(path, old, new, "added [mcp_servers.%s]" % _SERVER_NAME), ""


def _config_texts(root: str, skipped: List[str]) -> Dict[str, str]:
    """The project's config files whose headers may block the tag (a CSP): path from `root` -> text."""
    texts: Dict[str, str] = {}
    for name in ("vite.config.js", "vite.config.ts", "vite.config.mjs", "next.config.js", "next.config.mjs",
                 "settings.py", "app.py"):
        for path in (os.path.join(root, name), os.path.join(root, os.path.basename(root), name)):
            text = _read_file_text(path, skipped) or ""
            if text:
                texts[os.path.relpath(path, root)] = text
    for dirpath in [d for d in (os.path.join(root, x) for x in os.listdir(root)) if os.path.isdir(d)][:50]:
        path = os.path.join(dirpath, "settings.py")
        text = _read_file_text(path, skipped) or ""
        if text:
            texts[os.path.relpath(path, root)] = text
    return texts


def _root_file(root: str, skipped: Optional[List[str]] = None) -> str:
    """React Router's (or Remix's) root route, the file whose Layout renders every document: root.tsx,
    .jsx, .ts or .js in the app directory (`appDirectory` of react-router.config, remix.config or the
    vite plugin's options, else app/), as the app has it; when none is there, the name it would have
    (.tsx beside a tsconfig.json, else .jsx)."""
    app_dir = "app"
    for name in ("react-router.config", "remix.config", "vite.config"):
        for ext in ("ts", "js", "mts", "mjs", "cjs"):
            text = _read_file_text(os.path.join(root, "%s.%s" % (name, ext)), skipped) or ""
            m = re.search(r"\bappDirectory\s*:\s*([\"'`])([^\"'`\n]+)\1", text)
            if m and app_dir == "app":
                app_dir = os.path.normpath(m.group(2)).replace(os.sep, "/")
    names = ["%s/root.%s" % (app_dir, ext) for ext in ("tsx", "jsx", "ts", "js")]
    there = next((f for f in names if os.path.isfile(os.path.join(root, f))), None)
    return there or names[0 if os.path.isfile(os.path.join(root, "tsconfig.json")) else 1]


def _astro_layouts(root: str, skipped: Optional[List[str]] = None) -> List[str]:
    """The Astro layouts that write a <head> (src/layouts/*.astro), from `root`."""
    folder = os.path.join(root, "src", "layouts")
    try:
        names = sorted(f for f in os.listdir(folder) if f.endswith(".astro"))
    except OSError:
        return []
    return ["src/layouts/" + f for f in names if "<head" in (_read_file_text(os.path.join(folder, f), skipped)
                                                           or "").lower()]


def _tag_advice(root: str, app: dict, origin: str, skipped: Optional[List[str]] = None) -> str:
    """The note that says where the dev-only tag goes in an app with no HTML file init can edit (a
    framework that renders its documents, a Node server's layout), and the tag in that framework's form."""
    kind = app["kind"]
    root_file = _root_file(root, skipped) if kind in ("React Router 7", "Remix") else ""
    layouts = _astro_layouts(root, skipped) if kind == "Astro" else []
    where = {"Next.js": "app/layout.tsx (or pages/_document.tsx), with `import Script from 'next/script'`",
             "React Router 7": "%s, inside <head> of its Layout (framework mode has no HTML entry: the "
                               "Layout renders every page's document)" % root_file,
             "Remix": "%s, inside <head> of its Layout (or of the default export's document)" % root_file,
             "Astro": "%s, inside <head>" % (" or ".join(layouts) if layouts else
                                             "the layout every page uses (src/layouts/*.astro)"),
             "SvelteKit": "src/app.html, before %sveltekit.head%",
             "Nuxt": "nuxt.config, at the top level of defineNuxtConfig",
             "Hono": "the <head> of the layout your routes render (hono/jsx's jsxRenderer; in an html`` template, "
                     "the same <script src> under the same condition)"}
    if kind in _SERVER_KINDS and kind != "Hono":
        where[kind] = "the <head> of the layout template your pages render"
    if kind == "Flask" or kind in [k for _, k in _ASGI_FRAMEWORKS]:  # no template with a </head> found
        wrap = "reticle.wsgi(app.wsgi_app, inject=True)" if kind == "Flask" else "reticle.asgi(app, inject=True)"
        return ("%s app (%s): no template with a </head> found; wrap the app as below with %s, which adds the tag "
                "before </head> of each HTML page, or add this to your pages' <head>: %s"
                % (kind, app["why"], wrap, _dev_snippet(kind, origin)))
    return "%s app (%s): add this to %s: %s" % (kind, app["why"], where.get(kind, "the dev HTML entry"),
                                                _dev_snippet(kind, origin, bool(app.get("vite"))))


def _init_plan(root: str, home: str, port: int, command: List[str]) -> dict:
    """Everything `reticle init` would do in `root`, as data: {app, changes, notes, warnings}."""
    origin = "http://127.0.0.1:%d" % port
    skipped: List[str] = []  # special or oversized files met on the way, named in the notes
    app = _detect_app(root, skipped)
    changes: List[_InitChange] = []
    notes: List[str] = []
    entry = app.get("entry")
    texts: Dict[str, str] = {}
    if app["kind"] == "Django":
        # no template is edited: the middleware (under DEBUG, added below) puts the tag into each page
        if entry:
            texts[os.path.relpath(entry, root)] = _read_file_text(entry, skipped) or ""
        notes.append("Django: reticle.DjangoMiddleware adds the script tag (%s/reticle.js) to each HTML page "
                     "while DEBUG is on; no template is edited%s" % (origin, "" if port == DEFAULT_PORT else
                                                                     "; run the app with RETICLE_PORT=%d" % port))
    elif entry and _outside_project(root, entry):
        notes.append("%s: left alone (init edits files of the project only); add the tag by hand: %s"
                     % (_outside_project(root, entry), _dev_snippet(app["kind"], origin)))
        entry = None
        app = dict(app, entry=None)
    elif entry:
        text = _read_file_text(entry, skipped) or ""
        texts[os.path.relpath(entry, root)] = text
        snippet = _dev_snippet(app["kind"], origin)
        if "/reticle.js" in text:
            notes.append("%s already loads reticle.js" % os.path.relpath(entry, root))
        else:
            m = re.search(r"</head\s*>", text, re.I)
            if m:
                new = text[:m.start()] + "  " + snippet + "\n" + text[m.start():]
                changes.append(_InitChange(entry, text, new, "added the dev-only script tag before </head>"))
            else:
                notes.append("%s has no </head>; add this where the page's head is: %s"
                             % (os.path.relpath(entry, root), snippet))
    else:
        notes.append(_tag_advice(root, app, origin, skipped))
    texts.update(_config_texts(root, skipped))
    server_changes, server_notes = _server_init(root, app, skipped)
    changes += server_changes
    notes += server_notes
    notes += [] if app.get("server") else _otel_init(root, origin, port)  # a Vite page on a Python API: no Node
    stores = _find_stores(root, lambda path: _read_file_text(path, skipped))
    mcp_changes, mcp_notes, warnings = _mcp_configs(root, home, command, stores, skipped)
    changes += mcp_changes
    notes += mcp_notes
    change = _gitignore_auth(root, skipped)
    changes += [change] if change else []
    notes += sorted(set(skipped))
    return {"app": app, "changes": changes, "notes": notes, "warnings": _csp_warnings(texts, origin) + warnings,
            "stores": stores}


def _mcp_configs(root: str, home: str, command: List[str], stores: List[_StoreFinding], skipped: List[str]
                 ) -> Tuple[List[_InitChange], List[str], List[str]]:
    """The MCP client configurations init writes (changes, notes, warnings): the `reticle` server in the
    project's three JSON files, with the stores found as env RETICLE_WATCH_DB (the daemon `reticle mcp`
    starts inherits it), and in Codex's.  Codex's file is the user's, read for every project, so this
    project's store is not written there (another project's daemon would watch it): a note says how."""
    changes: List[_InitChange] = []
    notes: List[str] = []
    stdio: Dict[str, Any] = {"command": command[0], "args": command[1:]}
    urls = [f.url for f in stores if f.url]
    if urls:
        stdio["env"] = {_WATCH_ENV: " ".join(urls)}
    written = []
    for rel, key, entry_obj in ((".mcp.json", "mcpServers", dict(stdio)),
                                (os.path.join(".cursor", "mcp.json"), "mcpServers", dict(stdio)),
                                (os.path.join(".vscode", "mcp.json"), "servers", dict(stdio, type="stdio"))):
        problem = _outside_project(root, os.path.join(root, rel))
        if problem:
            notes.append("%s: left alone (init writes inside the project only)" % problem)
            continue
        change, note = _merge_json_server(os.path.join(root, rel), key, entry_obj, skipped)
        if change:
            changes.append(change)
            written.append(rel)
        if note:
            notes.append(note)
    codex_home = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    change, note = _merge_codex(os.path.join(codex_home, "config.toml"), command, skipped)
    if change:
        changes.append(change)
    if note:
        notes.append(note)
    if urls:
        notes.append("Codex: its config.toml serves every project, so this project's store is not written "
                     "there; in Codex, call reticle_watch_db {url: ...} with the URL above")
    warnings = []
    if written and any(_has_password(u) for u in urls):
        warnings.append("%s in %s holds the database password (the daemon needs it to read the database): "
                        "keep %s out of version control" % (_WATCH_ENV, ", ".join(written),
                                                            "that file" if len(written) == 1 else "these files"))
    return changes, notes, warnings


def _gitignore_auth(root: str, skipped: Optional[List[str]] = None) -> Optional[_InitChange]:
    """The project's .gitignore with `.reticle/auth/` (setup flows' saved logins) added, unless a
    line already ignores it; None when there is nothing to add or no git here."""
    path = os.path.join(root, ".gitignore")
    if _outside_project(root, path) or not (os.path.exists(path) or os.path.isdir(os.path.join(root, ".git"))):
        return None
    old = _read_file_text(path, skipped)
    if old is None and os.path.lexists(path):
        return None  # not a regular file (named in skipped), or unreadable: left alone
    lines = {ln.strip().lstrip("/").rstrip("/") for ln in (old or "").splitlines()}
    if lines & {".reticle", ".reticle/auth", ".reticle/*", ".reticle/auth/*"}:
        return None
    new = (old or "") + ("\n" if old and not old.endswith("\n") else "") + \
        "# Reticle: setup flows' saved logins (cookies, storage)\n.reticle/auth/\n"
    return _InitChange(path, old, new, "git-ignores .reticle/auth/ (saved logins)")


_SERVER_CHECK = ("to check it: run the app, click something in a tab with Reticle, then reticle_observe "
                 "{filters: [\"server\"]} lists what the server did, or reticle_assert {kind: \"server\"}")
# `litestar run` serves the Litestar instance it finds in the module, so it would serve the app unwrapped
_LITESTAR_RUN = (", and serve the wrapped app with an ASGI server (`uvicorn %s --reload`): `litestar run` "
                 "looks for the Litestar instance itself and would serve it without the wrap")


def _asgi_target(module: Optional[str]) -> str:
    """uvicorn's `module:app` for the app module at `module` (a path from the project), src layout included."""
    if not module:
        return "module:app"
    parts = os.path.splitext(module)[0].split(os.sep)
    parts = parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts
    if parts[0] == "src" and len(parts) > 1:
        return "%s:app --app-dir src" % ".".join(parts[1:])
    return "%s:app" % ".".join(parts)


_DJANGO_BLOCK = ("\n\nif DEBUG:  # added by `reticle init` (dev only): Reticle's script tag and server truth\n"
                 "    MIDDLEWARE = [*MIDDLEWARE, \"reticle.DjangoMiddleware\"]\n")


def _server_init(root: str, app: dict, skipped: Optional[List[str]] = None) -> Tuple[List[_InitChange], List[str]]:
    """Reticle's server middleware for the app (Server truth): Django's settings get a
    MIDDLEWARE entry under DEBUG when they define both; Flask and FastAPI get the dev-only line
    to add, printed (a wrap placed wrongly would break the app, so it is never written)."""
    changes: List[_InitChange] = []
    notes: List[str] = []
    kind = app.get("server") or app.get("kind")  # a Vite page's Python API server, else the app itself

    def read(path: str) -> str:
        return _read_file_text(path, skipped) or ""
    if kind == "Django":
        candidates = [os.path.join(root, "settings.py")] + sorted(
            os.path.join(root, d, "settings.py") for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        settings = [p for p in candidates if os.path.isfile(p)]
        if not settings:
            notes.append("Django: no settings.py found; add under DEBUG: %s" % _DJANGO_BLOCK.strip())
        for path in settings[:1]:
            text = read(path)
            rel = os.path.relpath(path, root)
            if "reticle.DjangoMiddleware" in text:
                notes.append("%s already has reticle.DjangoMiddleware" % rel)
            elif re.search(r"^MIDDLEWARE\s*=", text, re.M) and re.search(r"^DEBUG\s*=", text, re.M):
                changes.append(_InitChange(path, text, text.rstrip("\n") + _DJANGO_BLOCK,
                                           "added reticle.DjangoMiddleware to MIDDLEWARE under DEBUG (server truth)"))
                notes.append("Django server truth: " + _SERVER_CHECK)
            else:
                notes.append("%s: no top-level MIDDLEWARE and DEBUG to extend; add: %s" % (rel, _DJANGO_BLOCK.strip()))
    elif kind == "Flask":
        notes.append("Flask server truth: in %s, after `app = Flask(...)`, add `import reticle` and "
                     "`if app.debug: app.wsgi_app = reticle.wsgi(app.wsgi_app)` (SQLAlchemy: "
                     "`reticle.watch_sqlalchemy(engine)`); %s" % (app.get("module") or "your app module",
                                                                   _SERVER_CHECK))
    elif kind in [k for _, k in _ASGI_FRAMEWORKS]:
        run = _LITESTAR_RUN % _asgi_target(app.get("module")) if kind == "Litestar" else ""
        notes.append("%s server truth: in %s, after the routes, add `import reticle` and, in development only, "
                     "`app = reticle.asgi(app)` (SQLAlchemy: `reticle.watch_sqlalchemy(engine)`)%s; %s"
                     % (kind, app.get("module") or "your app module", run, _SERVER_CHECK))
    return changes, notes


_OTEL_PACKAGES = ("@opentelemetry/sdk-node @opentelemetry/auto-instrumentations-node @opentelemetry/instrumentation "
                  "@opentelemetry/exporter-trace-otlp-http")
# OpenTelemetry's zero-code start for Node, ES modules included: the loader hook instruments what a server
# imports (node:http under Vite), the register starts the SDK with every instrumentation
_NODE_OPTIONS = ("--experimental-loader=@opentelemetry/instrumentation/hook.mjs "
                 "--import @opentelemetry/auto-instrumentations-node/register")
_NEXT_INSTRUMENTATION = (
    "instrumentation.ts: `export async function register() { if (process.env.NEXT_RUNTIME === 'nodejs' && "
    "process.env.NODE_ENV === 'development') { await import('./instrumentation.node') } }` and "
    "instrumentation.node.ts: `import { NodeSDK } from '@opentelemetry/sdk-node'; import "
    "{ getNodeAutoInstrumentations } from '@opentelemetry/auto-instrumentations-node'; import "
    "{ OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'; new NodeSDK({ traceExporter: "
    "new OTLPTraceExporter(), instrumentations: [getNodeAutoInstrumentations()] }).start();`, with those "
    "packages and the database client (pg, mysql2 ...) in next.config's serverExternalPackages (bundled, "
    "they would escape the instrumentation)")


def _otel_init(root: str, origin: str, port: int = DEFAULT_PORT) -> List[str]:
    """For a Node project (package.json): what turns OpenTelemetry tracing on towards the daemon
    (Server truth from spans), printed, never written: the packages, how the app loads them
    (NODE_OPTIONS, or Next.js's instrumentation.ts), the exporter's variables, how to check it."""
    if not os.path.isfile(os.path.join(root, "package.json")):
        return []
    deps = _package_deps(root)
    servers = [f for f in _PAGE_FRAMEWORKS if f[0] != "react-scripts"] + list(_NODE_FRAMEWORKS) + [("vite", "Vite")]
    kind = next((name for dep, name in servers if dep in deps), "Node")  # the server that runs the app's code
    token = "reticle token" if port == DEFAULT_PORT else "reticle token --port %d" % port  # the daemon on that port
    env = ("OTEL_EXPORTER_OTLP_ENDPOINT=%s OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer%%20$(%s)\" "
           "OTEL_TRACES_EXPORTER=otlp OTEL_BSP_SCHEDULE_DELAY=200" % (origin, token))
    if kind == "Next.js":
        load = "add %s; run `next dev` with %s" % (_NEXT_INSTRUMENTATION, env)
    else:
        load = ("run the dev server with NODE_OPTIONS=\"%s\" %s (the loader hook is what instruments a server "
                "that imports node:http as an ES module, as the dev servers of Vite, React Router, Nuxt, SvelteKit "
                "and Astro do: without it they send database spans but no HTTP SERVER span; a CommonJS server "
                "needs only the --import) and the exporter sends protobuf (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf "
                "by default; the daemon reads both)" % (_NODE_OPTIONS, env))
    return ["%s server truth from OpenTelemetry (dev only): `npm install --save-dev %s`; %s. The SDK gives each "
            "same-origin fetch/XHR a traceparent the daemon issued, and the daemon reads the spans at %s/v1/traces "
            "(database writes need the instrumentation of the database client, which the auto-instrumentations "
            "include for pg, mysql2, mongodb and more); %s, each record saying source \"otel\""
            % (kind, _OTEL_PACKAGES, load, origin, _SERVER_CHECK)]


def _init_command(port: int = DEFAULT_PORT) -> List[str]:
    """How MCP clients start Reticle: `reticle mcp` when it is on PATH, else this interpreter
    and this file; with `--port N` when the daemon's port is not the default."""
    extra = ["--port", str(port)] if port != DEFAULT_PORT else []
    if shutil.which("reticle"):
        return ["reticle", "mcp"] + extra
    return _self_command() + ["mcp"] + extra


class _MaskedOut:
    """The output init prints to, with the password of every store URL it found masked, as written and
    as JSON escapes it (a dry run prints the new lines of a configuration that holds the real URL)."""

    def __init__(self, out: Any, stores: List[_StoreFinding]) -> None:
        self.out = out
        self.pairs: List[Tuple[str, str]] = []
        for f in stores:
            if f.url and _has_password(f.url):
                masked = _mask_url(f.url)
                self.pairs.append((f.url, masked))
                for ascii in (True, False):
                    self.pairs.append((json.dumps(f.url, ensure_ascii=ascii)[1:-1],
                                       json.dumps(masked, ensure_ascii=ascii)[1:-1]))

    def write(self, text: str) -> None:
        for real, masked in self.pairs:
            text = text.replace(real, masked)
        self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def _cli_init(dry_run: bool, yes: bool, port: int) -> int:
    """`reticle init`: print the plan, then write it (unless --dry-run; a terminal asks first
    unless --yes)."""
    import stat
    root = os.path.abspath(os.getcwd())
    plan = _init_plan(root, os.path.expanduser("~"), port, _init_command(port))
    out = _MaskedOut(sys.stdout, plan["stores"])
    app = plan["app"]
    out.write("app: %s (%s)%s\n" % (app["kind"], app["why"], "; HTML entry %s" % os.path.relpath(app["entry"], root)
                                    if app.get("entry") else ""))
    for line in _store_lines(plan["stores"]):
        out.write("store: %s\n" % line)
    for w in plan["warnings"]:
        out.write("warning: %s\n" % w)
    for n in plan["notes"]:
        out.write("note: %s\n" % n)
    changes = plan["changes"]
    if not changes:
        out.write("nothing to change\n")
        return 0
    verb = "would change" if dry_run else "changing"
    for c in changes:
        shown = c.path if not c.path.startswith(root + os.sep) else os.path.relpath(c.path, root)
        out.write("%s %s: %s\n" % (verb, shown, c.what))
        if dry_run:
            for line in c.new.splitlines():
                if c.old is None or line not in c.old.splitlines():
                    out.write("  + %s\n" % line)
    if dry_run:
        out.write("dry run: nothing written\n")
        return 0
    if not yes and sys.stdin.isatty():
        out.write("apply these changes? [y/N] ")
        out.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            out.write("nothing written\n")
            return 1
    written = 0
    for c in changes:
        inside = not os.path.relpath(c.path, root).startswith(os.pardir)
        problem = _outside_project(root, c.path) if inside else None
        if problem:  # it changed since the plan was made
            out.write("skipped %s: %s\n" % (c.path, problem))
            continue
        os.makedirs(os.path.dirname(c.path), exist_ok=True)
        # no O_TRUNC before fstat: a FIFO or device put there since the plan is named, never written or waited on
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | (getattr(os, "O_NOFOLLOW", 0) if inside
                                                                             else 0)
        try:
            fd = os.open(c.path, flags, 0o644)
        except OSError as exc:
            out.write("skipped %s: %s\n" % (c.path, exc.strerror or exc))
            continue
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            out.write("skipped %s: it is %s, not a regular file\n" % (c.path, _special_kind(mode)))
            continue
        os.ftruncate(fd, 0)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:  # line endings as planned (CRLF kept)
            fh.write(c.new)
        written += 1
    out.write("done: %d file(s) written\n" % written)
    return 0
