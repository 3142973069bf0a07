"""The CLI: main([...]) return codes and output, and `reticle serve` as a process."""

import contextlib
import json
import logging
import os
import re
import signal
import socket
import stat
import subprocess
import sys

import pytest

import reticle
from _harness import RETICLE_PY
from _harness import Daemon
from _harness import daemon_env
from _harness import free_port
from _harness import port_listens
from _harness import wait_until

CURL = "/usr/bin/curl"


@pytest.fixture
def cli_logging():
    """`serve` points reticle's and tornado's loggers at stderr; put them back afterwards."""
    saved = {}
    for name in ("reticle", "tornado"):
        logger = logging.getLogger(name)
        saved[name] = (list(logger.handlers), logger.level, logger.propagate)
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


@pytest.fixture
def listening_stranger():
    """A plain TCP socket that listens and never answers: not a Reticle daemon."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def sentences(text):
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def test_version(capsys):
    assert reticle.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == reticle.__version__


def test_version_as_a_process():
    for cmd in ([sys.executable, RETICLE_PY, "--version"], [sys.executable, "-m", "reticle", "--version"]):
        proc = subprocess.run(cmd, capture_output=True, timeout=30, cwd=os.path.dirname(RETICLE_PY))
        assert proc.returncode == 0
        assert proc.stdout.decode().strip() == reticle.__version__


def test_no_command_is_a_usage_error(capsys):
    assert reticle.main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "serve" in err


def test_unknown_command_is_a_usage_error(capsys):
    assert reticle.main(["frobnicate"]) == 2
    assert "frobnicate" in capsys.readouterr().err


def test_status_with_nothing_running(clean_env, capsys):
    port = free_port()
    assert reticle.main(["status", "--port", str(port)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "nothing listens on port %d" % port in err
    assert "reticle serve" in err  # the next step


def test_status_json_with_nothing_running(clean_env, capsys):
    port = free_port()
    assert reticle.main(["status", "--json", "--port", str(port)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["running"] is False
    assert data["port"] == port
    assert data["reason"] == "nothing listens on port %d" % port


def test_status_names_a_stranger(clean_env, capsys, listening_stranger):
    assert reticle.main(["status", "--port", str(listening_stranger)]) == 1
    assert "not a Reticle daemon" in capsys.readouterr().err


def test_status_against_a_daemon(module_daemon, clean_env, capsys):
    assert reticle.main(["status", "--json", "--port", str(module_daemon.port)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["running"] is True
    assert data["port"] == module_daemon.port
    assert data["pid"] == module_daemon.pid
    assert data["version"] == reticle.__version__
    assert reticle.main(["status", "--port", str(module_daemon.port)]) == 0
    out = capsys.readouterr().out
    assert "pid %d" % module_daemon.pid in out
    assert "port %d" % module_daemon.port in out


def test_status_reads_reticle_port(module_daemon, clean_env, monkeypatch, capsys):
    monkeypatch.setenv("RETICLE_PORT", str(module_daemon.port))
    assert reticle.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pid"] == module_daemon.pid


@pytest.mark.parametrize("value", ["70000", "-1"])
def test_port_out_of_range(clean_env, capsys, value):
    assert reticle.main(["status", "--port", value]) == 1
    assert value in capsys.readouterr().err


def test_stop(daemon, monkeypatch, capsys):
    monkeypatch.setenv("RETICLE_STATE_DIR", daemon.state_dir)
    monkeypatch.delenv("RETICLE_TOKEN", raising=False)
    record = os.path.join(daemon.state_dir, "daemon-%d.json" % daemon.port)
    assert os.path.exists(record)
    assert reticle.main(["stop", "--port", str(daemon.port)]) == 0
    assert "stopped" in capsys.readouterr().err
    assert not port_listens(daemon.port)
    assert daemon.proc.wait(10) == 0
    assert not os.path.exists(record)


def test_stop_with_nothing_running(clean_env, capsys):
    assert reticle.main(["stop", "--port", str(free_port())]) == 0
    assert "nothing to stop" in capsys.readouterr().err


def test_stop_with_the_wrong_token_is_refused(module_daemon, clean_env, capsys):
    # clean_env's state dir holds a different token from the daemon's
    assert reticle.main(["stop", "--port", str(module_daemon.port)]) == 1
    assert "refused" in capsys.readouterr().err
    assert port_listens(module_daemon.port)


def test_stop_refuses_a_stranger(clean_env, capsys, listening_stranger):
    assert reticle.main(["stop", "--port", str(listening_stranger)]) == 1
    assert "not a Reticle daemon" in capsys.readouterr().err


def test_token_and_rotate(clean_env, capsys):
    assert reticle.main(["token"]) == 0
    first = capsys.readouterr().out.strip()
    assert len(first) >= 32
    assert reticle.main(["token"]) == 0
    assert capsys.readouterr().out.strip() == first
    token_file = clean_env / "token"
    assert token_file.read_text().strip() == first
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(clean_env).st_mode) == 0o700
    assert reticle.main(["token", "--rotate"]) == 0
    rotated = capsys.readouterr().out.strip()
    assert rotated != first
    assert token_file.read_text().strip() == rotated
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert [p.name for p in clean_env.iterdir()] == ["token"]  # no temporary file left


def test_token_tightens_a_loose_state_dir(clean_env, capsys):
    clean_env.mkdir(mode=0o755)
    os.chmod(clean_env, 0o755)
    assert reticle.main(["token"]) == 0
    assert stat.S_IMODE(os.stat(clean_env).st_mode) == 0o700


def test_token_from_the_environment(clean_env, monkeypatch, capsys):
    monkeypatch.setenv("RETICLE_TOKEN", "from-the-env")
    assert reticle.main(["token"]) == 0
    assert capsys.readouterr().out.strip() == "from-the-env"
    assert reticle.main(["token", "--rotate"]) == 1
    assert "RETICLE_TOKEN" in capsys.readouterr().err
    assert not (clean_env / "token").exists()


def serve_process(port, state_dir, *args):
    """`reticle serve` as a process: tornado's bind_sockets leaves the socket it failed
    to bind for the garbage collector, which would be a ResourceWarning in this process."""
    return subprocess.run([sys.executable, RETICLE_PY, "serve", "--port", str(port)] + list(args),
                          capture_output=True, timeout=30, env=daemon_env(state_dir))


def test_serve_on_a_port_held_by_a_stranger(tmp_path, listening_stranger):
    proc = serve_process(listening_stranger, tmp_path / "state")
    assert proc.returncode == 1
    line = [x for x in proc.stderr.decode().splitlines() if x.startswith("reticle: ")]
    assert len(line) == 1
    assert "not a Reticle daemon" in line[0]
    assert "port %d" % listening_stranger in line[0]
    assert len(sentences(line[0])) == 1


def test_serve_on_a_port_held_by_a_daemon(module_daemon, tmp_path):
    proc = serve_process(module_daemon.port, tmp_path / "state")
    assert proc.returncode == 1
    line = [x for x in proc.stderr.decode().splitlines() if x.startswith("reticle: ")]
    assert len(line) == 1
    assert "held by a Reticle daemon" in line[0]
    assert "pid %d" % module_daemon.pid in line[0]
    assert module_daemon.proc.poll() is None  # the running daemon is untouched
    assert not os.path.exists(tmp_path / "state" / ("daemon-%d.json" % module_daemon.port))


@pytest.mark.parametrize("how", ["flag", "env"])
def test_binding_beyond_loopback_needs_reticle_token(clean_env, cli_logging, capsys, monkeypatch, how):
    port = free_port()
    argv = ["serve", "--port", str(port)]
    if how == "flag":
        argv += ["--host", "0.0.0.0"]
    else:
        monkeypatch.setenv("RETICLE_HOST", "0.0.0.0")
    assert reticle.main(argv) == 1
    err = capsys.readouterr().err
    assert "RETICLE_TOKEN" in err
    assert "0.0.0.0" in err
    assert not port_listens(port)


@pytest.mark.parametrize("token", ["abc", "x" * (reticle.MIN_TOKEN_CHARS - 1)])
def test_a_short_token_is_refused_off_loopback(clean_env, cli_logging, capsys, monkeypatch, token):
    port = free_port()
    monkeypatch.setenv("RETICLE_TOKEN", token)
    assert reticle.main(["serve", "--port", str(port), "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err
    assert "at least %d characters" % reticle.MIN_TOKEN_CHARS in err
    assert "has %d" % len(token) in err and token not in err.replace("has %d" % len(token), "")
    assert not port_listens(port)


def test_serve_tls_answers_https_and_prints_the_fingerprint(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    state = tmp_path / "state"
    d = Daemon(state, args=["--tls"], ready=False)
    try:
        def https_status():
            proc = subprocess.run([CURL, "-sk", "--max-time", "2", "https://127.0.0.1:%d/status" % d.port],
                                  capture_output=True, timeout=10)
            return proc.returncode == 0 and proc.stdout and json.loads(proc.stdout)

        status = wait_until(https_status, 15, what="https /status (daemon log: %s)" % d.log_path)
        assert status["running"] is True, d.log()
        plain = subprocess.run([CURL, "-s", "--max-time", "2", "http://127.0.0.1:%d/status" % d.port],
                               capture_output=True, timeout=10)
        assert plain.returncode != 0 or b"running" not in plain.stdout
        cert = x509.load_pem_x509_certificate((state / "tls" / "cert.pem").read_bytes())
        fingerprint = cert.fingerprint(hashes.SHA256()).hex(":").upper()
        assert fingerprint in d.log()
        assert stat.S_IMODE(os.stat(state / "tls" / "key.pem").st_mode) == 0o600
    finally:
        assert d.stop() == 0


def test_sigterm_is_a_planned_stop(daemon):
    record = os.path.join(daemon.state_dir, "daemon-%d.json" % daemon.port)
    with open(record) as fh:
        assert json.load(fh)["pid"] == daemon.pid
    with contextlib.closing(socket.create_connection(("127.0.0.1", daemon.port), timeout=5)) as sock:
        sock.sendall(b"GET /mcp/sse HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n" % daemon.port)
        received = b""
        while b"event: endpoint" not in received:
            received += sock.recv(65536)
        daemon.proc.send_signal(signal.SIGTERM)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    assert daemon.proc.wait(10) == 0
    shutdown = received[received.index(b"event: shutdown"):].split(b"\n")
    assert json.loads(shutdown[1][len(b"data: "):])["reason"] == "signal SIGTERM"  # the shutdown names its cause
    assert not os.path.exists(record)
    assert not port_listens(daemon.port)


def test_state_dir_modes_of_a_running_daemon(module_daemon):
    assert stat.S_IMODE(os.stat(module_daemon.state_dir).st_mode) == 0o700
    names = sorted(os.listdir(module_daemon.state_dir))
    assert "machine.key" in names
    assert "token" in names
    assert "daemon-%d.json" % module_daemon.port in names
    for name in names:
        assert stat.S_IMODE(os.stat(os.path.join(module_daemon.state_dir, name)).st_mode) == 0o600, name


def test_serve_starts_again_and_again_on_new_state(tmp_path):
    """Three starts on three new state folders each answer /status for their own port and stop
    cleanly.  How fast a start is (issue 2: well under a second) is what bench/pyz_start.py prints
    as "serve ready"; a test does not time it."""
    for i in range(3):
        d = Daemon(tmp_path / ("state-%d" % i))
        try:
            assert d.status_at_start["port"] == d.port, d.status_at_start
        finally:
            assert d.stop() in (0, -15), d.log_path


def test_daemon_env_is_isolated(tmp_path):
    env = daemon_env(tmp_path)
    assert env["RETICLE_STATE_DIR"] == str(tmp_path)
    assert "RETICLE_TOKEN" not in env


def _cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as fh:
        return fh.read().rstrip(b"\0").split(b"\0")


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the re-exec needs memfd (Linux)")
def test_serve_re_execs_itself_from_bytecode_in_the_same_process_and_can_be_told_not_to(tmp_path):
    """`python reticle.py serve` hands its compiled code to a fresh interpreter before the third-party
    imports (the reexec module): the same pid now runs the small stub that loads the bytecode, answers
    /status, and is still the daemon; RETICLE_SERVE_REEXEC=0 keeps the first interpreter."""
    first = Daemon(tmp_path / "a")
    try:
        argv = _cmdline(first.pid)
        assert b"-c" in argv and any(b"marshal.loads" in a for a in argv), argv
        assert first.status_at_start["pid"] == first.pid
        # the daemon's own arguments follow the stub and its descriptor
        assert argv[-4:] == [RETICLE_PY.encode(), b"serve", b"--port", str(first.port).encode()], argv
    finally:
        first.close()
    plain = Daemon(tmp_path / "b", env={"RETICLE_SERVE_REEXEC": "0"})
    try:
        argv = _cmdline(plain.pid)
        assert argv[1] == RETICLE_PY.encode() and not any(b"marshal" in a for a in argv), argv
        assert plain.status_at_start["pid"] == plain.pid
    finally:
        plain.close()
