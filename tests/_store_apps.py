"""Fixture apps whose truth lives in their store, on stacks with no server hook, for the storage-truth tests:
tests/_php_store/index.php (plain PHP 8 on PDO: SQLite or PostgreSQL) under PHP's built-in server, and
tests/_node_json_store/server.js (Node's `http` module, a JSON file).  Each class starts its app on a free port
of 127.0.0.1 (AppProcess), names its store as Reticle would watch it (`watch_url`) and reads it back itself
(`rows()`: a list of dicts, by id), so a test never takes the app's word for what was saved.

Both apps behave by the title: a plain one is saved; first word "ghost" saves nothing under a success answer;
(PHP) first word "rollback" inserts in a transaction that is rolled back; a rename to a title starting with
"wrongrow" renames the note before it (the wrong row).  See each app's header."""

import functools
import glob
import json
import os
import shutil
import sqlite3
import subprocess
import urllib.parse
import urllib.request

import pytest

from _harness import AppProcess

HERE = os.path.dirname(os.path.abspath(__file__))
PG_BIN = max(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), default="")
PHP_INSTALL = "apt-get install -y php-cli php-sqlite3 php-pgsql"


@functools.lru_cache(maxsize=None)
def php_modules():
    """The lower-cased names `php -m` lists (empty when php is not installed)."""
    php = shutil.which("php")
    if php is None:
        return frozenset()
    out = subprocess.run([php, "-m"], capture_output=True, text=True, timeout=30)
    return frozenset(line.strip().lower() for line in out.stdout.splitlines() if line.strip())


def need_php(driver):
    """Skip the test unless php and its PDO `driver` ("sqlite" or "pgsql") are installed."""
    if shutil.which("php") is None:
        pytest.skip("php is not installed (%s)" % PHP_INSTALL)
    if "pdo_" + driver not in php_modules():
        pytest.skip("php lacks pdo_%s (%s)" % (driver, PHP_INSTALL))


def need_node():
    if shutil.which("node") is None:
        pytest.skip("node is not installed (apt-get install -y nodejs)")


def psql_path():
    """PostgreSQL's psql: the cluster's own binaries first, then PATH (None when neither has it)."""
    own = os.path.join(PG_BIN, "psql") if PG_BIN else ""
    return own if os.path.isfile(own) else shutil.which("psql")


def psql(port, dbname, sql, user="app", password=None):
    """`sql` run by psql as `user` on 127.0.0.1:port (TCP, with `password` when the cluster asks one) -> its
    unaligned, tuples-only output, stripped."""
    env = dict(os.environ, PGPASSWORD=password) if password else None
    out = subprocess.run([psql_path(), "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", dbname, "-X",
                          "-w", "-v", "ON_ERROR_STOP=1", "-tAc", sql], capture_output=True, text=True, timeout=30,
                         env=env, cwd="/tmp")
    if out.returncode != 0:
        raise RuntimeError("psql failed (%s): %s" % (sql, out.stderr.strip()))
    return out.stdout.strip()


def script_tag(daemon, tag):
    """The script tag an app prints in its head: Reticle's, or none with tag=False (or no daemon)."""
    return '<script src="%s/reticle.js"></script>' % daemon.url if tag and daemon is not None else ""


class PhpStore(AppProcess):
    """tests/_php_store/index.php under `php -S`: notes in SQLite (dsn=None, the file `db_path` in `tmp`) or in
    PostgreSQL (dsn="pgsql": database `dbname`, made if missing, on the caller's cluster at 127.0.0.1:pg_port as
    user `app`, over TCP: with `pg_password` for a cluster that asks one, tests/_postgres.py's APP_PASSWORD, or
    none under trust auth).  `watch_url` is "sqlite:////abs/path" or "postgresql://app@127.0.0.1:PORT/notes"
    ("postgresql://app:PASSWORD@..." with a password); `rows()` reads every row (id, title, api_token) from
    the store itself.  The table exists once this returns (the constructor's first request made it)."""

    def __init__(self, tmp, daemon, dsn=None, pg_port=None, tag=True, dbname="notes", pg_password=None):
        if dsn not in (None, "sqlite", "pgsql"):
            raise ValueError("dsn is None (SQLite) or 'pgsql', not %r" % (dsn,))
        self.kind = "pgsql" if dsn == "pgsql" else "sqlite"
        need_php(self.kind)
        super().__init__(tmp, "php-store")
        self.pg_port = pg_port
        self.pg_password = pg_password
        self.dbname = dbname
        if self.kind == "pgsql":
            if pg_port is None:
                raise ValueError("PhpStore(dsn='pgsql') needs the cluster's pg_port")
            if psql_path() is None:
                pytest.skip("PostgreSQL's psql is not installed (apt-get install -y postgresql)")
            if psql(pg_port, "postgres", "SELECT 1 FROM pg_database WHERE datname = '%s'" % dbname,
                    password=pg_password) != "1":
                psql(pg_port, "postgres", 'CREATE DATABASE "%s"' % dbname, password=pg_password)
            self.db_path = None
            user = "app:%s" % urllib.parse.quote(pg_password, safe="") if pg_password else "app"
            self.watch_url = "postgresql://%s@127.0.0.1:%d/%s" % (user, pg_port, dbname)
            notes_dsn = "pgsql:host=127.0.0.1;port=%d;dbname=%s;user=app" % (pg_port, dbname)
            if pg_password:
                notes_dsn += ";password=" + pg_password
        else:
            self.db_path = os.path.join(os.path.abspath(str(tmp)), "notes-%d.db" % self.port)
            self.watch_url = "sqlite:///" + self.db_path
            notes_dsn = "sqlite:" + self.db_path
        env = dict(os.environ, NOTES_DSN=notes_dsn, RETICLE_SCRIPT=script_tag(daemon, tag))
        self.start([shutil.which("php"), "-S", "127.0.0.1:%d" % self.port,
                    os.path.join(HERE, "_php_store", "index.php")], env, HERE,
                   then=lambda: urllib.request.urlopen(self.url + "/notes", timeout=10).close())

    def rows(self):
        """Every note in the store, by id: [{"id": 1, "title": "...", "api_token": "tok_..."}, ...]."""
        if self.kind == "pgsql":
            out = psql(self.pg_port, self.dbname, "SELECT COALESCE(json_agg(n ORDER BY n.id), '[]') FROM "
                       "(SELECT id, title, api_token FROM notes) n", password=self.pg_password)
            return json.loads(out)
        if not os.path.exists(self.db_path):
            return []
        conn = sqlite3.connect("file:%s?mode=ro" % self.db_path, uri=True, timeout=5)
        try:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute("SELECT id, title, api_token FROM notes ORDER BY id")]
        finally:
            conn.close()


class NodeJsonStore(AppProcess):
    """tests/_node_json_store/server.js under node: notes in the JSON file `file` (in `tmp`, written at start),
    `watch_url` "file:///abs/notes-PORT.json"; `rows()` reads the file itself."""

    def __init__(self, tmp, daemon, tag=True):
        need_node()
        super().__init__(tmp, "node-store")
        self.file = os.path.join(os.path.abspath(str(tmp)), "notes-%d.json" % self.port)
        self.watch_url = "file://" + self.file
        env = dict(os.environ, PORT=str(self.port), NOTES_FILE=self.file, RETICLE_SCRIPT=script_tag(daemon, tag))
        self.start([shutil.which("node"), os.path.join(HERE, "_node_json_store", "server.js")], env, HERE)

    def rows(self):
        """Every note in the file, by id: [{"id": 1, "title": "..."}, ...]."""
        if not os.path.exists(self.file):
            return []
        with open(self.file, encoding="utf-8") as fh:
            return sorted(json.load(fh)["notes"], key=lambda note: note["id"])
