"""reticle.pyz: build it once, then run it the ways users do.

Every CPython from 3.9 up that this machine has (pyenv keeps several) runs the pyz under
``python -I`` from an empty virtual environment made with ``--without-pip``, so nothing but the
standard library is importable except what the pyz brings.  The build reuses the wheel cache in
zipapp/.wheels, so only the first run on a machine needs PyPI.
"""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from _harness import free_port
from _harness import get_status
from _harness import mcp_session
from _harness import wait_until

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "zipapp", "build.py")
RETICLE = os.path.join(REPO, "reticle.py")
NOBODY = 65534

sys.path.insert(0, os.path.join(REPO, "zipapp"))
import build as zipapp_build  # noqa: E402

sys.path.remove(os.path.join(REPO, "zipapp"))


def _find_pythons():
    """[(version, path)] of every CPython from 3.9 up found on this machine."""
    found = []
    candidates = [sys.executable]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(root, "versions", "3.*", "bin", "python3")))
    candidates += sorted(glob.glob("/usr/bin/python3.*[0-9]"))
    for path in candidates:
        try:
            out = subprocess.run(
                [path, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2], "
                 "sys.implementation.name, getattr(sys, 'abiflags', ''))"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                timeout=30,
            ).stdout.split()
        except (OSError, subprocess.SubprocessError):
            continue
        if len(out) >= 2 and out[1] == "cpython" and "t" not in out[2:3] and out[0] in zipapp_build.PYTHONS:
            found.append((out[0], path))
    return found


ALL_PYTHONS = _find_pythons()
PYTHONS = {}
for _version_found, _path in ALL_PYTHONS:
    PYTHONS.setdefault(_version_found, _path)
VERSIONS = sorted(PYTHONS, key=zipapp_build._vtuple)


def _version():
    return zipapp_build.reticle_version(RETICLE)


def _env(home, **extra):
    """A small, explicit environment: nothing from the test process leaks into the pyz."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    env.update({key: str(value) for key, value in extra.items()})
    return env


def _run(argv, env, timeout=120):
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)


def _entries(cache):
    return sorted(name for name in os.listdir(cache) if not name.startswith("."))


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    if not os.path.exists(RETICLE):
        pytest.skip("reticle.py is not in the repository yet")
    out = tmp_path_factory.mktemp("dist") / "reticle.pyz"
    argv = [sys.executable, BUILD, "--out", str(out), "--reticle", RETICLE]
    for version in VERSIONS:
        argv += ["--python", version]
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=900)
    assert result.returncode == 0, result.stdout
    return str(out)


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    """Empty virtual environments (no pip), made on first use per version."""
    root = tmp_path_factory.mktemp("venvs")
    made = {}

    def get(version):
        if version not in made:
            path = root / version
            subprocess.run([PYTHONS[version], "-m", "venv", "--without-pip", str(path)],
                           check=True, timeout=120)
            python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
            probe = _run([str(python), "-I", "-c", "import importlib.util as u; "
                          "print([m for m in ('tornado', 'jsonschema', 'cryptography') "
                          "if u.find_spec(m)])"], _env(root))
            assert probe.stdout.strip() == "[]", "the venv is not empty: " + probe.stdout
            made[version] = str(python)
        return made[version]

    return get


def test_build_writes_a_runnable_zipapp(pyz):
    with open(pyz, "rb") as handle:
        assert handle.readline() == b"#!/usr/bin/env python3\n"
    assert os.path.getsize(pyz) < 12 * 1024 * 1024


def test_the_pyz_carries_no_test_files_of_its_dependencies(pyz):
    """What ships is what runs: no dependency's own tests or test helpers (they were 180 KB)."""
    import re
    import zipfile
    outer = zipfile.ZipFile(pyz)
    names = list(outer.namelist())
    for inner in [n for n in names if n.endswith((".whl", ".zip"))]:
        with zipfile.ZipFile(outer.open(inner)) as z:
            names += [inner + "!" + n for n in z.namelist()]
    tests = [n for n in names if re.search(r"(^|[/!])(tests?|testing)(/|\.py$)", n)]
    assert tests == [], tests[:20]


@pytest.mark.parametrize("version", VERSIONS)
def test_version_in_empty_venv(pyz, venvs, version, tmp_path):
    python = venvs(version)
    cache = tmp_path / "cache"
    env = _env(tmp_path / "home", RETICLE_CACHE_DIR=cache)
    for attempt in ("cold", "warm"):
        result = _run([python, "-I", pyz, "--version"], env)
        assert result.returncode == 0, (attempt, result.stderr)
        assert result.stdout.strip() == _version(), attempt
    [entry] = _entries(cache)
    assert entry.endswith("-cp" + version.replace(".", ""))
    assert os.stat(cache / entry).st_mode & 0o077 == 0


def _mcp_round_trip(url):
    """initialize, tools/list and tools/call through the official MCP Python SDK."""
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")

    async def talk():
        async with mcp_session("streamable-http", url[:-len("/mcp")]) as session:
            initialized = session.init_result
            listed = await session.list_tools()
            names = [tool.name for tool in listed.tools]
            called = await session.call_tool("reticle_sessions", {})
            return initialized, names, called

    return anyio.run(talk)


@pytest.mark.parametrize("version", VERSIONS)
def test_serve_answers_mcp_in_empty_venv(pyz, venvs, version, tmp_path):
    python = venvs(version)
    port = free_port()
    env = _env(tmp_path / "home", RETICLE_CACHE_DIR=tmp_path / "cache",
               RETICLE_STATE_DIR=tmp_path / "state")
    process = subprocess.Popen([python, "-I", pyz, "serve", "--host", "127.0.0.1",
                                "--port", str(port)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
    try:
        status = None
        try:  # True when the process ended first, the /status answer when it answered
            status = wait_until(lambda: process.poll() is not None or get_status(port, timeout=5), 60, 0.1)
        except AssertionError:
            pass
        if not isinstance(status, dict):
            process.kill()
            out, err = process.communicate(timeout=30)
            pytest.fail("serve never answered /status:\n%s%s" % (out, err))
        assert status["running"] is True
        assert status["version"] == _version()
        initialized, names, called = _mcp_round_trip("http://127.0.0.1:%d/mcp" % port)
        assert initialized.server_info.name == "reticle"
        assert "reticle_sessions" in names
        assert called.is_error is not True, called
        assert called.content and called.content[0].type == "text"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
    assert process.returncode == 0, err


def _shared_copy(pyz):
    """A world-readable copy of the pyz, for runs as another user."""
    folder = tempfile.mkdtemp(prefix="reticle-pyz-test-")
    os.chmod(folder, 0o755)
    target = os.path.join(folder, "reticle.pyz")
    shutil.copyfile(pyz, target)
    os.chmod(target, 0o644)
    return folder, target


def _python_for_nobody():
    """An interpreter that uid 65534 can run, with its version, or None."""
    for version, path in reversed(ALL_PYTHONS):
        probe = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                                "--clear-groups", path, "-c", "pass"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode == 0:
            return version, path
    return None


def test_read_only_home_falls_back_to_private_temp_dir(pyz, tmp_path):
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    folder, shared = _shared_copy(pyz)
    try:
        home = os.path.join(folder, "home")
        temp = os.path.join(folder, "tmp")
        os.mkdir(home, 0o555)
        os.chmod(home, 0o555)
        os.mkdir(temp)
        os.chmod(temp, 0o1777)
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("needs setpriv to run as another user")
            found = _python_for_nobody()
            if found is None:
                pytest.skip("no interpreter that uid %d can run" % NOBODY)
            version, python = found
            # A root-owned 0555 HOME is read-only for uid 65534, as on a locked-down machine.
            prefix = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
            uid = NOBODY
        else:
            version = VERSIONS[-1]
            python = PYTHONS[version]
            prefix = []
            uid = os.getuid()
        env = _env(home, TMPDIR=temp)
        for attempt in ("cold", "warm"):
            result = _run(prefix + [python, "-I", shared, "--version"], env)
            assert result.returncode == 0, (attempt, result.stderr)
            assert result.stdout.strip() == _version()
            assert result.stderr == "", attempt
        cache = os.path.join(temp, "reticle-%d" % uid)
        assert os.stat(cache).st_uid == uid
        assert os.stat(cache).st_mode & 0o777 == 0o700
        [entry] = _entries(cache)
        assert entry.endswith("-cp" + version.replace(".", ""))
        assert os.listdir(home) == []
    finally:
        subprocess.run(["rm", "-rf", folder])


def test_cache_dir_owned_by_another_user_is_refused(pyz, venvs, tmp_path):
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root to give a directory away")
    python = venvs(VERSIONS[-1])
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, NOBODY, NOBODY)
    home = tmp_path / "home"
    result = _run([python, "-I", pyz, "--version"], _env(home, RETICLE_CACHE_DIR=foreign))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == _version()
    assert re.fullmatch(r"reticle: not using \S+: owned by uid %d, not 0\n" % NOBODY,
                        result.stderr), result.stderr
    assert os.listdir(foreign) == []
    assert len(_entries(home / ".cache" / "reticle")) == 1


def test_cache_dir_writable_by_others_is_refused(pyz, venvs, tmp_path):
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    python = venvs(VERSIONS[-1])
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    home = tmp_path / "home"
    result = _run([python, "-I", pyz, "--version"], _env(home, RETICLE_CACHE_DIR=shared))
    assert result.returncode == 0, result.stderr
    assert "writable by group or others (mode 777)" in result.stderr
    assert os.listdir(shared) == []
    assert len(_entries(home / ".cache" / "reticle")) == 1


def test_cache_dir_on_noexec_mount_is_refused(pyz, venvs, tmp_path):
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("needs root on Linux to mount a noexec tmpfs")
    python = venvs(VERSIONS[-1])
    mount = tmp_path / "noexec"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=64m", "tmpfs", str(mount)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % mounted.stdout.decode(errors="replace"))
    try:
        home = tmp_path / "home"
        result = _run([python, "-I", pyz, "--version"],
                      _env(home, RETICLE_CACHE_DIR=mount / "cache"))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == _version()
        assert "on a noexec mount" in result.stderr
        assert len(_entries(home / ".cache" / "reticle")) == 1
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_six_first_runs_at_once(pyz, venvs, tmp_path):
    python = venvs(VERSIONS[-1])
    cache = tmp_path / "cache"
    env = _env(tmp_path / "home", RETICLE_CACHE_DIR=cache)
    processes = [subprocess.Popen([python, "-I", pyz, "--version"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True) for _ in range(6)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in processes]
    for process in processes:
        process.stdout.close()
        process.stderr.close()
    for code, out, err in results:
        assert code == 0, err
        assert out.strip() == _version()
        assert err == ""
    # One complete entry, and no temporary directory left behind by the losers.
    assert len(os.listdir(cache)) == 1


def test_unsupported_interpreter_gets_one_clear_line(pyz, tmp_path):
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    older = sorted(glob.glob(os.path.join(root, "versions", "3.[5-8].*", "bin", "python3")))
    if not older:
        pytest.skip("no CPython older than 3.9 on this machine")
    result = _run([older[-1], "-I", pyz, "--version"], _env(tmp_path))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("reticle: reticle.pyz needs CPython 3.9 or newer")
    for version in VERSIONS:
        assert "cp" + version.replace(".", "") in lines[0]


def test_missing_interpreter_build_gets_one_clear_line(venvs, tmp_path):
    """A pyz built for one CPython names what it carries when another one runs it."""
    if len(VERSIONS) < 2:
        pytest.skip("needs two CPython versions")
    built, other = VERSIONS[-1], VERSIONS[0]
    out = tmp_path / "one.pyz"
    result = _run([sys.executable, BUILD, "--out", str(out), "--reticle", RETICLE,
                   "--python", built, "--no-check"], dict(os.environ), timeout=600)
    assert result.returncode == 0, result.stderr
    cache = tmp_path / "cache"
    result = _run([venvs(other), "-I", str(out), "--version"],
                  _env(tmp_path / "home", RETICLE_CACHE_DIR=cache))
    assert result.returncode == 1
    assert result.stdout == ""
    tag = "cp" + built.replace(".", "")
    assert result.stderr == (
        "reticle: this reticle.pyz has no build for %s/cp%s. It carries: %s (%s)\n"
        % (zipapp_build.host_platform(), other.replace(".", ""), zipapp_build.host_platform(), tag))
    assert not cache.exists() or os.listdir(cache) == []


def test_stale_temporary_dirs_are_swept(pyz, venvs, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    stale = cache / ".tmp-killed-mid-extraction"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    fresh = cache / ".tmp-still-extracting"
    fresh.mkdir()
    result = _run([venvs(VERSIONS[-1]), "-I", pyz, "--version"],
                  _env(tmp_path / "home", RETICLE_CACHE_DIR=cache))
    assert result.returncode == 0, result.stderr
    assert not stale.exists()
    assert fresh.exists()


def test_every_platform_has_a_wheel_for_every_pin():
    """What --all-platforms would pack; reads PyPI's index only for pins not cached yet."""
    pins = zipapp_build.parse_pins(os.path.join(REPO, "zipapp", "pins.txt"))
    cache = os.path.join(REPO, "zipapp", ".wheels")
    missing = []
    for platform_key in zipapp_build.PLATFORMS:
        for python in zipapp_build.PYTHONS:
            for name, pin in sorted(zipapp_build.pins_for(pins, platform_key, python).items()):
                try:
                    files = zipapp_build.release_files(name, pin, cache)
                except OSError as error:
                    pytest.skip("PyPI unreachable: %s" % error)
                if zipapp_build.choose(files, name, platform_key, python, set()) is None:
                    missing.append("%s==%s %s/%s" % (name, pin, platform_key, python))
    assert missing == []


def test_pins_are_allowed_by_setup_cfg():
    """zipapp/pins.txt and setup.cfg's install_requires must agree on the direct dependencies."""
    import configparser

    requirements_module = pytest.importorskip("packaging.requirements")
    path = os.path.join(REPO, "setup.cfg")
    if not os.path.exists(path):
        pytest.skip("no setup.cfg yet")
    parser = configparser.ConfigParser()
    parser.read(path, encoding="utf-8")
    lines = [line.strip() for line in parser.get("options", "install_requires", fallback="").splitlines()]
    requirements = [requirements_module.Requirement(line) for line in lines if line]
    if not requirements:
        pytest.skip("setup.cfg has no install_requires yet")
    pins = zipapp_build.parse_pins(os.path.join(REPO, "zipapp", "pins.txt"))
    direct = {"tornado", "jsonschema", "cryptography"}
    problems = []
    for platform_key, (sys_platform, machine, _) in zipapp_build.PLATFORMS.items():
        for python in zipapp_build.PYTHONS:
            environment = {"python_version": python, "python_full_version": python + ".99",
                           "sys_platform": sys_platform, "platform_machine": machine,
                           "platform_system": {"linux": "Linux", "darwin": "Darwin",
                                               "win32": "Windows"}[sys_platform],
                           "implementation_name": "cpython", "extra": ""}
            chosen = zipapp_build.pins_for(pins, platform_key, python)
            for name in direct:
                applicable = [r for r in requirements if zipapp_build.canonical(r.name) == name
                              and (r.marker is None or r.marker.evaluate(environment))]
                if not applicable:
                    problems.append("%s: not required on %s/%s" % (name, platform_key, python))
                for requirement in applicable:
                    if not requirement.specifier.contains(chosen[name], prereleases=True):
                        problems.append("%s==%s not allowed by %s on %s/%s"
                                        % (name, chosen[name], requirement, platform_key, python))
    assert problems == []
