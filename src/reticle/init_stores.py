"""Init stores.

What `reticle init` reads to find the app's store, so that the daemon the MCP client starts watches it
(`RETICLE_WATCH_DB`, storage truth): the project's own configuration first, in this order, a
`DATABASE_URL` in its .env files, Django's settings, Rails' config/database.yml, Laravel's .env,
Prisma's schema; and only when none of them names a store, a SQLite file beside the app or a store its
code opens (better-sqlite3's `new Database('notes.db')`, `sqlite3.connect("app.db")`, a JSON file that
lowdb or readFile/writeFile keep).  Everything is read as text: Django settings with `ast`, YAML and
.env files by hand (the standard library has no YAML, and Reticle adds no dependency); nothing of the
user's code is imported or run.  Each finding names its source and either the URL to watch (absolute
paths, the real password: the daemon needs it) or why it cannot be watched.  `_mask_url` is the form
that is shown.
"""

from __future__ import annotations

import ast
import os
import re
import stat
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union


_Reader = Callable[[str], Optional[str]]  # path -> text, None when missing, special or too large

_ENV_FILES = (".env", ".env.development", ".env.local")  # lowest precedence first, as Next.js and Vite load them
_SQLITE_SUFFIXES = (".sqlite3", ".sqlite", ".db")
_SQLITE_HEADER = b"SQLite format 3\x00"
_STORE_DIRS = ("", "db", "data", "var", "instance", "prisma")  # where an app keeps its SQLite file
_SKIP_DIRS = ("node_modules", ".venv", "venv", ".git", "site-packages", "__pycache__", "dist", "build",
              "test", "tests", "__tests__", "spec")
_CODE_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".py")
_CODE_FILES_MAX = 2000  # source files read when looking for a store the code opens
_NOT_STORES = ("package.json", "package-lock.json", "composer.json", "tsconfig.json", "jsconfig.json",
               "manifest.json", "app.json", "vercel.json")
_WATCHABLE = ("sqlite", "sqlite3", "postgres", "postgresql", "file")
_ENGINES = {"mysql": "MySQL", "mysql2": "MySQL", "trilogy": "MySQL", "mariadb": "MariaDB", "oracle": "Oracle",
            "sqlserver": "SQL Server", "sqlsrv": "SQL Server", "mssql": "SQL Server", "mongodb": "MongoDB",
            "mongodb+srv": "MongoDB", "cockroachdb": "CockroachDB", "redis": "Redis"}


class _StoreFinding:
    """One store init found: where the project names it (`source`, as printed), the URL the daemon is
    to watch or None, and why not when None (a MySQL database, a value read from the environment)."""

    __slots__ = ("source", "url", "problem", "missing")

    def __init__(self, source: str, url: Optional[str] = None, problem: str = "", missing: bool = False) -> None:
        self.source = source
        self.url = url
        self.problem = problem
        self.missing = missing  # a file the app has not created yet

    def __repr__(self) -> str:
        return "_StoreFinding(%r, %r, %r)" % (self.source, _mask_url(self.url or ""), self.problem)


def _mask_url(url: str) -> str:
    """`url` with its password (in the authority, up to its last @ as URL parsers read it, or a
    `password=` query parameter) shown as ***: what init prints.  A pattern, not a parser, so that a
    malformed URL is masked too; anything without a password comes back unchanged."""
    url = re.sub(r"(?i)^([a-z][a-z0-9+.-]*://[^:/?#@]*):[^/?#]*@", r"\1:***@", url)
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", url)


def _has_password(url: str) -> bool:
    return _mask_url(url) != url


def _sqlite_url(path: str) -> str:
    """SQLAlchemy's form of an absolute SQLite path: sqlite:////abs/path.db (four slashes)."""
    return "sqlite:///" + os.path.abspath(path)


def _pg_url(user: str, password: str, host: str, port: str, name: str) -> str:
    """A postgresql:// URL from a framework's separate settings (user and password escaped)."""
    auth = urllib.parse.quote(user, safe="")
    if password:
        auth += ":" + urllib.parse.quote(password, safe="")
    netloc = (auth + "@" if auth else "") + (host or "localhost") + (":" + port if port else "")
    return "postgresql://%s/%s" % (netloc, urllib.parse.quote(name, safe=""))


def _file_head(path: str, size: int = 16) -> Optional[bytes]:
    """The first bytes of a regular file (opened without blocking, so a FIFO never hangs init), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):  # ValueError: a NUL in a path read from a file
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_sqlite_file(path: str) -> bool:
    """A SQLite database by its header (an empty file is one SQLite has not written yet)."""
    head = _file_head(path)
    return head is not None and (head == b"" or head.startswith(_SQLITE_HEADER))


def _path_finding(source: str, path: str) -> _StoreFinding:
    """The finding for a store named by its path: a SQLite file (by its header, or by its name when the
    app has not made it yet), else a JSON file store or a folder of them (file:///...)."""
    if os.path.basename(path) in ("", ":memory:"):
        return _StoreFinding(source, problem="an in-memory database: nothing outlives the process to watch")
    if "\x00" in path:
        return _StoreFinding(source, problem="its path holds a NUL character")
    path = os.path.abspath(path)
    exists = os.path.lexists(path)
    if os.path.isdir(path):
        return _StoreFinding(source, "file://" + urllib.request.pathname2url(path))
    if (exists and _is_sqlite_file(path)) or (not exists and path.endswith(_SQLITE_SUFFIXES)):
        return _StoreFinding(source, _sqlite_url(path), missing=not exists)
    if path.endswith(".json"):
        return _StoreFinding(source, "file://" + urllib.request.pathname2url(path), missing=not exists)
    return _StoreFinding(source, problem="%s is neither a SQLite database nor a JSON file" % path)


def _unwatchable(source: str, kind: str, what: str) -> _StoreFinding:
    return _StoreFinding(source, problem="a %s database (%s): found, but Reticle cannot watch %s yet"
                         % (kind, what, kind))


def _url_finding(source: str, value: str, base: str) -> _StoreFinding:
    """The finding for a database URL as SQLAlchemy, dj-database-url, Rails or Prisma write it: sqlite
    paths made absolute (relative ones from `base`), a driver suffix (`postgresql+psycopg2`) dropped,
    file: URLs resolved to a SQLite file or a JSON store, any other engine named as not watchable yet."""
    value = value.strip()
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", value)
    if not m:
        return _StoreFinding(source, problem="%r is not a database URL" % _short_value(value))
    scheme = m.group(1).lower()
    family = scheme if scheme in _ENGINES else scheme.split("+", 1)[0]
    rest = value[m.end():]
    if family in ("sqlite", "sqlite3"):
        path = rest[3:] if rest.startswith("///") else rest[2:] if rest.startswith("//") else rest
        path = path.split("?", 1)[0]
        if path in ("", ":memory:"):
            return _StoreFinding(source, problem="an in-memory database: nothing outlives the process to watch")
        return _path_finding(source, os.path.join(base, path))
    if family in ("postgres", "postgresql"):
        return _StoreFinding(source, family + ":" + rest)
    if family == "file":
        path = rest.split("?", 1)[0].split("#", 1)[0]
        if path.startswith("//"):
            host, _, path = path[2:].partition("/")
            if host not in ("", "localhost"):
                return _StoreFinding(source, problem="it names another host (%s); only a file on this machine "
                                                     "can be watched" % host)
            path = urllib.request.url2pathname("/" + path)
        return _path_finding(source, os.path.join(base, path))
    return _unwatchable(source, _ENGINES.get(family, family), scheme + ":")


def _short_value(value: str) -> str:
    return value if len(value) <= 60 else value[:57] + "..."


# -- .env files ------------------------------------------------------------------------------------

def _dotenv(text: str) -> Dict[str, str]:
    """The variables of a .env file: `KEY=value`, `export KEY=value`, values quoted ("..." with
    escapes, '...' as written) or bare (a ` #` starts a comment).  Multi-line values are not read."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$", line)
        if not m:
            continue
        raw = m.group(2).strip()
        if raw[:1] in ("'", '"') and raw.find(raw[0], 1) > 0:
            value = raw[1:raw.find(raw[0], 1)]
            if raw[0] == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        else:
            value = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
        out[m.group(1)] = value
    return out


class _EnvFiles:
    """The project's .env files (.env, .env.development, .env.local), each file's variables kept, and
    what the app sees: a later file overrides an earlier one, ${VAR} expanded from the same files."""

    def __init__(self, root: str, read: _Reader, names: Tuple[str, ...] = _ENV_FILES) -> None:
        self.files: List[Tuple[str, Dict[str, str]]] = []
        for name in names:
            text = read(os.path.join(root, name))
            if text is not None:
                self.files.append((name, _dotenv(text)))

    def get(self, key: str) -> Optional[Tuple[str, str]]:
        """(value, the file it comes from) of `key`, the winning file's, or None."""
        for name, values in reversed(self.files):
            if key in values:
                return values[key], name
        return None

    def expanded(self, value: str) -> Optional[str]:
        """`value` with each ${VAR} taken from these files (python-dotenv's form; a bare $ stays, as in
        a password), or None when one is not set here."""
        missing: List[str] = []

        def one(m: "re.Match[str]") -> str:
            found = self.get(m.group(1))
            if found is None:
                missing.append(m.group(0))
                return ""
            return found[0]
        out = re.sub(r"\$\{(\w+)\}", one, value)
        return None if missing else out


def _from_dotenv(root: str, env: _EnvFiles, prisma: bool) -> List[_StoreFinding]:
    """DATABASE_URL in each .env file: which file the app loads depends on its stack (python-dotenv
    and Node's dotenv read .env, Next.js and Vite .env.local and .env.development too), so each one is
    a finding.  A Prisma `file:./dev.db` is left to the Prisma source: it is relative to the schema."""
    out: List[_StoreFinding] = []
    for name, values in env.files:
        value = values.get("DATABASE_URL")
        if not value or (prisma and value.startswith("file:") and not value.startswith("file://")):
            continue
        source = "%s DATABASE_URL" % name
        expanded = env.expanded(value)
        if expanded is None:
            out.append(_StoreFinding(source, problem="it uses a variable no .env file here sets (%s)" % value))
        else:
            out.append(_url_finding(source, expanded, root))
    return out


def _from_laravel(root: str, env: _EnvFiles) -> List[_StoreFinding]:
    """Laravel's DB_CONNECTION (config/database.php's defaults where a DB_ variable is unset); its
    DB_URL, when set, wins as it does in Laravel."""
    found = env.get("DB_CONNECTION")
    if found is None:
        return []
    kind, name = found[0].strip().lower(), found[1]
    source = "Laravel %s DB_CONNECTION=%s" % (name, kind)

    def var(key: str, default: str) -> str:
        got = env.get(key)
        return got[0] if got is not None and got[0] != "" else default
    url = var("DB_URL", var("DATABASE_URL", ""))
    if url:
        return [_url_finding(source + " (DB_URL)", url, root)]
    if kind == "sqlite":
        path = var("DB_DATABASE", os.path.join("database", "database.sqlite"))
        return [_path_finding(source, os.path.join(root, path))]
    if kind == "pgsql":
        return [_StoreFinding(source, _pg_url(var("DB_USERNAME", "root"), var("DB_PASSWORD", ""),
                                              var("DB_HOST", "127.0.0.1"), var("DB_PORT", "5432"),
                                              var("DB_DATABASE", "laravel")))]
    return [_unwatchable(source, _ENGINES.get(kind, kind), "DB_CONNECTION=" + kind)]


# -- Django settings, read with ast ----------------------------------------------------------------

class _Unread:
    """A settings value init cannot know without running the code: why (read from the environment, a
    call it does not follow)."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


_PyValue = Union[str, _Unread]
_ENV_CALLS = ("os.environ.get", "os.getenv", "environ.get", "getenv", "env", "config", "env.str", "env.int")
_PATH_IDENTITY = ("str", "os.fspath", "os.path.abspath", "os.path.realpath", "os.path.normpath", "abspath")


def _call_name(node: ast.AST) -> str:
    """The dotted name a call's function is written as (`os.path.join`), or ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _call_name(node.value)
        return inner + "." + node.attr if inner else ""
    return ""


def _py_call(node: ast.Call, names: Dict[str, _PyValue], here: str) -> _PyValue:
    """A call in a settings value: the path functions Django's templates use (Path(), .resolve(),
    os.path.join/dirname, str()); a read of the environment is named as such."""
    name = _call_name(node.func)
    args = [_py_value(a, names, here) for a in node.args]
    unread = next((a for a in args if isinstance(a, _Unread)), None)
    if name in _ENV_CALLS or name.startswith("os.environ"):
        first = node.args[0] if node.args else node
        key = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ast.unparse(first)
        return _Unread("it is read from the environment (%s)" % key)
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute", "expanduser") \
            and not node.args:
        return _py_value(node.func.value, names, here)
    if unread is not None:
        return unread
    strs = [a for a in args if isinstance(a, str)]
    if name in ("Path", "pathlib.Path", "PurePath", "os.path.join", "join") and strs:
        return os.path.join(*strs)
    if name in ("os.path.dirname", "dirname") and len(strs) == 1:
        return os.path.dirname(strs[0])
    if name in _PATH_IDENTITY and len(strs) == 1:
        return strs[0]
    return _Unread("it is computed by %s(), which init does not run" % (name or "a call"))


def _py_value(node: ast.AST, names: Dict[str, _PyValue], here: str) -> _PyValue:
    """The value of a settings expression made of literals, names set earlier in the settings,
    __file__ and path arithmetic (`BASE_DIR / 'db.sqlite3'`, f-strings), or why it cannot be known."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else "" if node.value is None else str(node.value)
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return here
        return names.get(node.id, _Unread("%s is not set in the settings init reads" % node.id))
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _py_value(node.value, names, here)
        return os.path.dirname(inner) if isinstance(inner, str) else inner
    if isinstance(node, ast.Subscript) and _call_name(node.value).endswith("environ"):
        return _Unread("it is read from the environment (%s)" % ast.unparse(node.slice))
    if isinstance(node, ast.Call):
        return _py_call(node, names, here)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
        left, right = _py_value(node.left, names, here), _py_value(node.right, names, here)
        if isinstance(left, _Unread):
            return left
        if isinstance(right, _Unread):
            return right
        return os.path.join(left, right) if isinstance(node.op, ast.Div) else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_py_value(v.value if isinstance(v, ast.FormattedValue) else v, names, here) for v in node.values]
        return next((p for p in parts if isinstance(p, _Unread)), None) or "".join(str(p) for p in parts)
    return _Unread("%s is not a literal" % _short_value(ast.unparse(node)))


def _py_names(path: str, read: _Reader, depth: int = 0) -> Tuple[Dict[str, _PyValue], Optional[ast.Module]]:
    """The top-level names of a settings module with a value init can know, after those of the
    modules it star-imports from its own package (`from .base import *`); and its tree."""
    text = read(path)
    try:
        tree = ast.parse(text or "", filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return {}, None
    here = os.path.abspath(path)
    names: Dict[str, _PyValue] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and depth < 3 \
                and [a.name for a in node.names] == ["*"]:
            names.update(_py_names(os.path.join(os.path.dirname(path), node.module.replace(".", os.sep) + ".py"),
                                   read, depth + 1)[0])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = _py_value(node.value, names, here)
    return names, tree


def _databases_node(tree: ast.Module) -> Optional[ast.AST]:
    """The value last assigned to DATABASES at the top level of the settings."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "DATABASES"
                                                for t in node.targets):
            found = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == "DATABASES":
            found = node.value
    return found


def _django_database(source: str, node: ast.AST, names: Dict[str, _PyValue], here: str,
                     root: str) -> _StoreFinding:
    """One entry of DATABASES: sqlite3 by its NAME (a path, relative ones from the project folder),
    postgresql by NAME/USER/PASSWORD/HOST/PORT, dj_database_url by its literal default."""
    if isinstance(node, ast.Call) and _call_name(node.func) in ("dj_database_url.config", "dj_database_url.parse"):
        parse = _call_name(node.func).endswith("parse")
        given = list(node.args[:1]) if parse else [k.value for k in node.keywords if k.arg == "default"]
        value = _py_value(given[0], names, here) if given else _Unread("no default is written")
        if isinstance(value, _Unread):
            return _StoreFinding(source, problem="dj_database_url's URL could not be read: " + value.why)
        return _url_finding(source + ("" if parse else " (dj_database_url's default; DATABASE_URL in the "
                                                         "environment wins)"), value, root)
    if isinstance(node, ast.Call):
        return _StoreFinding(source, problem="it is computed by %s(), which init does not run"
                             % _short_value(_call_name(node.func) or "a call"))
    if not isinstance(node, ast.Dict):
        return _StoreFinding(source, problem="it is not a literal dict init can read")
    fields: Dict[str, _PyValue] = {}
    for key, item in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            fields[key.value] = _py_value(item, names, here)
    engine = fields.get("ENGINE", "")
    if isinstance(engine, _Unread):
        return _StoreFinding(source, problem="its ENGINE cannot be read: " + engine.why)
    unread = sorted((k, v.why) for k, v in fields.items() if isinstance(v, _Unread)
                    and k in ("NAME", "USER", "PASSWORD", "HOST", "PORT"))
    if unread:
        return _StoreFinding(source, problem="could not read its %s: %s" % (
            "/".join(k for k, _ in unread), "; ".join("%s: %s" % kv for kv in unread)))
    text = {k: v for k, v in fields.items() if isinstance(v, str)}
    if engine.endswith("sqlite3"):
        if not text.get("NAME"):
            return _StoreFinding(source, problem="a SQLite database without a NAME")
        return _path_finding(source, os.path.join(root, text["NAME"]))
    if "postgresql" in engine or "postgis" in engine:
        return _StoreFinding(source, _pg_url(text.get("USER", ""), text.get("PASSWORD", ""), text.get("HOST", ""),
                                             text.get("PORT", ""), text.get("NAME", "")))
    kind = next((v for k, v in _ENGINES.items() if k in engine), engine.rsplit(".", 1)[-1] or "unknown")
    return _unwatchable(source, kind, "ENGINE %s" % engine)


def _settings_files(root: str) -> List[str]:
    """Django settings within two levels of the project: */settings.py and settings/*.py."""
    out: List[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = 0 if dirpath == root else os.path.relpath(dirpath, root).count(os.sep) + 1
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS) if depth < 2 else []
        if "settings.py" in filenames and os.path.basename(dirpath) != "settings":
            out.append(os.path.join(dirpath, "settings.py"))
        if os.path.basename(dirpath) == "settings" and depth >= 1:
            out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    return out


def _from_django(root: str, read: _Reader) -> List[_StoreFinding]:
    """Each database of DATABASES in the project's settings; production settings files are named and
    left out (a development tool watches the development database)."""
    out: List[_StoreFinding] = []
    for path in _settings_files(root):
        rel = os.path.relpath(path, root)
        names, tree = _py_names(path, read)
        databases = _databases_node(tree) if tree is not None else None
        if databases is None:
            continue
        if re.search(r"prod", os.path.basename(path), re.I):
            out.append(_StoreFinding("Django %s" % rel, problem="production settings; not watched"))
            continue
        if os.path.basename(os.path.dirname(path)) == "settings":
            fallback = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        else:
            fallback = os.path.dirname(os.path.dirname(os.path.abspath(path)))
        if not isinstance(names.get("BASE_DIR"), str):
            names["BASE_DIR"] = fallback  # the folder above the settings package, as Django's template sets it
        if not isinstance(databases, ast.Dict):
            out.append(_django_database("Django %s DATABASES" % rel, databases, names, path, root))
            continue
        for key, value in zip(databases.keys, databases.values):
            alias = key.value if isinstance(key, ast.Constant) else "?"
            out.append(_django_database("Django %s DATABASES[%r]" % (rel, alias), value, names, path, root))
    return out


# -- Rails config/database.yml, the simple shape read by hand --------------------------------------

def _yaml_scalar(raw: str) -> str:
    """A YAML scalar as a string: quotes taken off, a trailing comment dropped."""
    raw = raw.strip()
    if raw[:1] in ("'", '"') and raw.find(raw[0], 1) > 0:
        return raw[1:raw.find(raw[0], 1)]
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def _simple_yaml(text: str) -> Dict[str, Any]:
    """Nested mappings of scalars as database.yml writes them: `key: value`, `name: &anchor`,
    `<<: *anchor` (merged, keys written in the block winning), comments.  Lists, flow style and
    multi-line scalars are not read (database.yml has none in the shape Rails generates)."""
    top: Dict[str, Any] = {}
    anchors: Dict[str, Dict[str, Any]] = {}
    stack: List[Tuple[int, Dict[str, Any]]] = [(-1, top)]
    for line in text.splitlines():
        body = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        m = re.match(r"( *)([^\s:#][^:]*?|<<)\s*:(?:\s+(.*))?$", body)
        if not m or body.lstrip().startswith(("<%", "---", "- ")):
            continue
        indent, key, value = len(m.group(1)), m.group(2).strip(), (m.group(3) or "").strip()
        while stack[-1][0] >= indent:
            stack.pop()
        current = stack[-1][1]
        if key == "<<" and value.startswith("*"):
            for k, v in anchors.get(value[1:], {}).items():
                current.setdefault(k, dict(v) if isinstance(v, dict) else v)
        elif value == "" or value.startswith("&"):
            child: Dict[str, Any] = {}
            current[key] = child
            if value.startswith("&"):
                anchors[value[1:].split()[0]] = child
            stack.append((indent, child))
        else:
            current[key] = _yaml_scalar(value)
    return top


def _rails_database(source: str, config: Dict[str, Any], root: str) -> _StoreFinding:
    """One Rails database block: `url`, or sqlite3's `database` path, or postgresql's
    database/username/password/host/port; an ERB value (<%= ... %>) is named as unreadable."""
    fields = {k: v for k, v in config.items() if isinstance(v, str)}
    erb = sorted(k for k in ("adapter", "url", "database", "username", "password", "host", "port")
                 if "<%" in fields.get(k, ""))
    if erb:
        return _StoreFinding(source, problem="its %s %s ERB (<%%= ... %%>), which init cannot read"
                             % (", ".join(erb), "is" if len(erb) == 1 else "are"))
    if fields.get("url"):
        return _url_finding(source, fields["url"], root)
    adapter = fields.get("adapter", "")
    if adapter == "sqlite3":
        if not fields.get("database"):
            return _StoreFinding(source, problem="a SQLite database without a database path")
        return _path_finding(source, os.path.join(root, fields["database"]))
    if adapter in ("postgresql", "postgis"):
        return _StoreFinding(source, _pg_url(fields.get("username", ""), fields.get("password", ""),
                                             fields.get("host", ""), fields.get("port", ""),
                                             fields.get("database", "")))
    return _unwatchable(source, _ENGINES.get(adapter, adapter or "unknown"), "adapter %s" % (adapter or "unset"))


def _from_rails(root: str, read: _Reader) -> List[_StoreFinding]:
    """The development databases of config/database.yml: one block, or several (Rails' multiple
    databases: `primary:`, `cache:` ... under `development:`)."""
    text = read(os.path.join(root, "config", "database.yml"))
    if text is None:
        return []
    development = _simple_yaml(text).get("development")
    source = "Rails config/database.yml development"
    if not isinstance(development, dict):
        return [_StoreFinding(source, problem="it has no development block init can read")]
    if any(isinstance(development.get(k), str) for k in ("adapter", "url", "database")):
        return [_rails_database(source, development, root)]
    return [_rails_database("%s.%s" % (source, name), block, root)
            for name, block in development.items() if isinstance(block, dict)]


# -- Prisma ----------------------------------------------------------------------------------------

def _prisma_schemas(root: str) -> List[str]:
    candidates = [os.path.join(root, "prisma", "schema.prisma"), os.path.join(root, "schema.prisma")]
    folder = os.path.join(root, "prisma", "schema")
    try:
        candidates += [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".prisma")]
    except OSError:
        pass  # no multi-file schema
    return [p for p in candidates if os.path.isfile(p)]


def _from_prisma(root: str, read: _Reader, env: _EnvFiles) -> List[_StoreFinding]:
    """Prisma's datasource: provider and url (a literal, or env("X") read from the project's .env or
    prisma/.env); a sqlite `file:./dev.db` is relative to the schema's folder, as Prisma reads it."""
    out: List[_StoreFinding] = []
    for path in _prisma_schemas(root):
        text = re.sub(r"//[^\n]*", "", read(path) or "")
        for block in re.finditer(r"\bdatasource\s+(\w+)\s*\{([^}]*)\}", text):
            source = "Prisma %s datasource %s" % (os.path.relpath(path, root), block.group(1))
            provider = re.search(r'\bprovider\s*=\s*"([^"]*)"', block.group(2))
            literal = re.search(r'\burl\s*=\s*"([^"]*)"', block.group(2))
            from_env = re.search(r'\burl\s*=\s*env\(\s*"([^"]*)"\s*\)', block.group(2))
            kind = provider.group(1) if provider else ""
            url = literal.group(1) if literal else None
            if from_env:
                got = env.get(from_env.group(1)) or _EnvFiles(os.path.dirname(path), read, (".env",)).get(
                    from_env.group(1))
                if got is None:
                    out.append(_StoreFinding(source, problem='its url is env("%s"), which no .env file here sets'
                                             % from_env.group(1)))
                    continue
                url, source = got[0], source + ' (env("%s") from %s)' % (from_env.group(1), got[1])
            if url is None:
                out.append(_StoreFinding(source, problem="no url init can read"))
            elif kind == "sqlite":
                rest = url[5:] if url.startswith("file:") else url
                out.append(_path_finding(source, os.path.join(os.path.dirname(path), rest.split("?", 1)[0])))
            elif kind in ("postgresql", "postgres"):
                out.append(_url_finding(source, url, root))
            else:
                out.append(_unwatchable(source, _ENGINES.get(kind, kind or "unknown"), "provider %s" % kind))
    return out


# -- otherwise: a SQLite file beside the app, or a store its code opens ----------------------------

def _from_files(root: str) -> List[_StoreFinding]:
    """SQLite databases (by their header) in the project folder and the folders apps keep them in:
    db/, data/, var/, instance/ (Flask), prisma/."""
    out: List[_StoreFinding] = []
    for sub in _STORE_DIRS:
        folder = os.path.join(root, sub) if sub else root
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(_SQLITE_SUFFIXES) and _is_sqlite_file(path):
                out.append(_path_finding("a SQLite file beside the app (%s)" % os.path.relpath(path, root), path))
    return out


_PATH_EXPR = r"""(?:[\w.]*(?:join|resolve)\((?:[^()]|\([^()]*\))*\)|"[^"\n]*"|'[^'\n]*'|`[^`\n]*`|[A-Za-z_$][\w$]*)"""
# the calls that open a store, each with the kind of store its first argument names
_STORE_CALLS = (
    (re.compile(r"\bnew\s+(?:\w+\.)?Database(?:Sync)?\(\s*(%s)" % _PATH_EXPR), "sqlite"),
    (re.compile(r"\b(?:sqlite3|aiosqlite)\.connect\(\s*(%s)" % _PATH_EXPR), "sqlite"),
    (re.compile(r"\b(?:JSONFile|JSONFileSync|JSONFilePreset|JSONFileSyncPreset|FileSync|FileAsync)\(\s*(%s)"
                % _PATH_EXPR), "json"),
    (re.compile(r"\b(?:readFile|readFileSync|writeFile|writeFileSync)\(\s*(%s)" % _PATH_EXPR), "json"),
)
_HERE_TOKENS = ("__dirname", "import.meta.dirname", "os.path.dirname(__file__)",
                "os.path.dirname(os.path.abspath(__file__))", "os.path.dirname(os.path.realpath(__file__))")


def _code_path(expr: str, here: str, root: str, consts: Dict[str, str], depth: int = 0) -> Optional[str]:
    """The path a path expression in code names: a string literal (relative to the project folder, the
    app's working directory), path.join/resolve with __dirname (the file's folder) or literals, a
    template string over __dirname, or a constant set to one of these in the same file; else None."""
    expr = expr.strip()
    if expr[:1] in ("'", '"', "`") and expr[-1:] == expr[:1]:
        inner = expr[1:-1]
        if expr[0] == "`":
            inner = inner.replace("${__dirname}", here).replace("${import.meta.dirname}", here)
        return None if "${" in inner or not inner else os.path.join(root, inner)
    call = re.match(r"[\w.]*(?:join|resolve)\((.*)\)$", expr, re.S)
    if call:
        base, parts = root, []
        for token in re.findall(r"""os\.path\.\w+\((?:[^()]|\([^()]*\))*\)|"[^"]*"|'[^']*'|[\w.$]+(?:\(\))?""",
                                call.group(1)):
            if token in _HERE_TOKENS:
                base = here
            elif token == "process.cwd()":
                base = root
            elif token[:1] in ("'", '"'):
                parts.append(token[1:-1])
            elif token in consts and depth < 3:
                resolved = _code_path(consts[token], here, root, consts, depth + 1)
                if resolved is None:
                    return None
                base = resolved
            else:
                return None
        return os.path.join(base, *parts) if parts else None
    if expr in consts and depth < 3:
        return _code_path(consts[expr], here, root, consts, depth + 1)
    return None


def _code_files(root: str) -> List[str]:
    """The app's .js/.ts/.py files at most two folders deep, without dependencies, tests and builds."""
    out: List[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = 0 if dirpath == root else os.path.relpath(dirpath, root).count(os.sep) + 1
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS) if depth < 2 else []
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(_CODE_SUFFIXES)
                and not re.search(r"(\.test\.|\.spec\.|^test_|_test\.py$)", f)]
        if len(out) >= _CODE_FILES_MAX:
            break
    return out[:_CODE_FILES_MAX]


def _from_code(root: str, read: _Reader) -> List[_StoreFinding]:
    """Stores the app's code opens by name: a SQLite file (better-sqlite3, node:sqlite, sqlite3 in
    Node or Python) or a JSON file that lowdb or readFile/writeFile keep."""
    out: List[_StoreFinding] = []
    for path in _code_files(root):
        text = read(path) or ""
        if not re.search(r"Database|connect\(|JSONFile|FileSync|FileAsync|[rw][a-z]*File", text):
            continue
        consts = dict(re.findall(r"(?:^|\b(?:const|let|var)\s+)([A-Za-z_$][\w$]*)\s*=\s*(%s)\s*;?\s*$" % _PATH_EXPR,
                                 text, re.M))
        here = os.path.dirname(os.path.abspath(path))
        for pattern, kind in _STORE_CALLS:
            for m in pattern.finditer(text):
                target = _code_path(m.group(1), here, root, consts)
                if target is None or target.endswith(":memory:"):
                    continue
                if kind == "json" and (not target.endswith(".json") or os.path.basename(target) in _NOT_STORES
                                       or os.path.basename(target).endswith(".config.json")):
                    continue
                call = _short_value(" ".join(text[m.start():m.end()].split()) + ")")
                out.append(_path_finding("%s: %s" % (os.path.relpath(path, root), call), target))
    return out


def _guarded(source: str, find: Callable[[], List[_StoreFinding]]) -> List[_StoreFinding]:
    """What one source finds; a file that defeats its reader (nested past Python's recursion limit, a
    NUL in a path) becomes a finding that says so, and init goes on."""
    try:
        return find()
    except (OSError, ValueError, RecursionError) as exc:
        return [_StoreFinding(source, problem="could not be read (%s: %s)" % (type(exc).__name__,
                                                                               _short_value(str(exc))))]


def _find_stores(root: str, read: _Reader) -> List[_StoreFinding]:
    """Every store the project names, each once (by URL), in the order of the sources: .env
    DATABASE_URL, Django, Rails, Laravel, Prisma; only when none of them names one (watchable or not),
    SQLite files beside the app and the stores its code opens."""
    env = _EnvFiles(root, read)
    prisma = bool(_prisma_schemas(root))
    found = (_guarded(".env files", lambda: _from_dotenv(root, env, prisma))
             + _guarded("Django settings", lambda: _from_django(root, read))
             + _guarded("Rails config/database.yml", lambda: _from_rails(root, read))
             + _guarded("Laravel .env", lambda: _from_laravel(root, env))
             + _guarded("Prisma schema", lambda: _from_prisma(root, read, env)))
    if not found:
        found = _guarded("SQLite files", lambda: _from_files(root)) + _guarded("the app's code",
                                                                             lambda: _from_code(root, read))
    seen: Set[Any] = set()
    out: List[_StoreFinding] = []
    for finding in found:
        key = finding.url or (finding.source, finding.problem)
        if key not in seen:
            seen.add(key)
            out.append(finding)
    return out


def _store_lines(found: List[_StoreFinding]) -> List[str]:
    """What init prints about the stores, passwords masked: each finding with its source, then what to
    do when there is nothing to watch."""
    lines = []
    for f in found:
        if f.url:
            lines.append("%s (%s)%s" % (_mask_url(f.url), f.source, "; not there yet, the app creates it"
                                        if f.missing else ""))
        else:
            lines.append("%s: %s" % (f.source, f.problem))
    if not any(f.url for f in found):
        lines.append("%s: if the app has one, add RETICLE_WATCH_DB=<url> to the env of the reticle MCP server "
                     "(sqlite:////abs/path.db, postgresql://user:pass@host:port/db, file:///abs/path.json) "
                     "or call reticle_watch_db" % ("no database found" if not found else "nothing to watch"))
    return lines
