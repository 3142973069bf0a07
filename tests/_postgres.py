"""A throwaway PostgreSQL cluster for the tests (Debian's `postgresql` package; tests/bootstrap.sh installs it).

`start_cluster(logical)` is a context manager: it makes a cluster in a temporary folder, starts it on a free
port of 127.0.0.1 and yields a `Cluster` (its `port` and a `stop`, so `port, stop = cluster` works too); leaving
the block stops it (an immediate stop) and removes the folder. The superuser is `app` with the password
`APP_PASSWORD`: connections over TCP must give a password (scram-sha-256), so a wrong one is refused; `psql()`
runs as `app` over the cluster's Unix socket, where trust needs none. `logical=True` starts it with
`wal_level=logical` (what logical decoding needs), `logical=False` with the default (`replica`). As root, the
cluster runs as the `postgres` user in a folder it can reach (pytest's own is private to root).
"""

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from typing import Callable, Iterator, NamedTuple

import pytest

from _harness import free_port

PG_BIN = max(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), default="")
APP_PASSWORD = "s3cret-Pa55"
INSTALL = "sh tests/bootstrap.sh browser (it installs Debian's postgresql)"


class Cluster(NamedTuple):
    """A running cluster: its TCP port on 127.0.0.1, how to stop it (idempotent), and its socket folder."""

    port: int
    stop: Callable[[], None]
    socket_dir: str = ""


def _as_postgres():
    """The command prefix that runs a program as the `postgres` user when the tests run as root."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _initdb(root, data):
    """Make the cluster's files: superuser `app`, trust on the Unix socket, scram-sha-256 over TCP."""
    pwfile = os.path.join(root, "pw")
    with open(pwfile, "w", encoding="utf-8") as fh:
        fh.write(APP_PASSWORD + "\n")
    if _as_postgres():
        shutil.chown(pwfile, "postgres")
    subprocess.run(_as_postgres() + [PG_BIN + "/initdb", "-D", data, "-U", "app", "--pwfile", pwfile,
                                     "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"],
                   check=True, capture_output=True, cwd="/tmp")


@contextlib.contextmanager
def start_cluster(logical: bool) -> Iterator[Cluster]:
    """A fresh cluster on a free port for the block (skips the test when PostgreSQL is not installed)."""
    if not os.path.isfile(os.path.join(PG_BIN, "initdb")):
        pytest.skip("PostgreSQL is not installed: %s" % INSTALL)
    root = tempfile.mkdtemp(prefix="reticle-pg-")
    if _as_postgres():
        shutil.chown(root, "postgres")
    data, port = os.path.join(root, "data"), free_port()
    _initdb(root, data)
    options = "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off" % (port, root)
    if logical:
        options += " -c wal_level=logical"
    subprocess.run(_as_postgres() + [PG_BIN + "/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w",
                                     "-o", options, "start"], check=True, capture_output=True, cwd="/tmp")
    stopped = []

    def stop():
        if not stopped:
            stopped.append(True)
            subprocess.run(_as_postgres() + [PG_BIN + "/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                           capture_output=True, cwd="/tmp")

    try:
        yield Cluster(port, stop, root)
    finally:
        stop()
        shutil.rmtree(root, ignore_errors=True)


def psql(cluster: Cluster, sql: str, db: str = "postgres") -> str:
    """Run `sql` as the superuser `app` over the cluster's socket (psql -tA): its output, stripped."""
    out = subprocess.run([PG_BIN + "/psql", "-h", cluster.socket_dir, "-p", str(cluster.port), "-U", "app",
                          "-d", db, "-v", "ON_ERROR_STOP=1", "-tAc", sql],
                         capture_output=True, text=True, check=True, cwd="/tmp")
    return out.stdout.strip()
