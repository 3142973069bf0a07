"""tests/requirements.txt: the exact versions the suite installs (tests/bootstrap.sh), resolved from
tests/requirements.in for every CPython from 3.9 to 3.14.

The pins must agree with what they were resolved from and with setup.cfg, say how they are made, and
install: on this interpreter and on CPython 3.9 (when the machine has one) in a virtual environment
made here with nothing in it, through the package index pip is configured with, and without pip having
to backtrack; for 3.14, the newest CPython the README claims, every pinned release must have a wheel.
"""

import configparser
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN = os.path.join(REPO, "tests", "requirements.in")
LOCK = os.path.join(REPO, "tests", "requirements.txt")
COMMAND = "uv pip compile --universal --python-version 3.9.2 tests/requirements.in -o tests/requirements.txt"
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
# What pip prints when it has to try older releases to find a set that installs together.
BACKTRACKING = re.compile(r"backtrack|looking at multiple versions|ResolutionImpossible|conflicting dependencies",
                          re.IGNORECASE)

requirements_module = pytest.importorskip("packaging.requirements")


def _requirements(path):
    """The requirement lines of a requirements file (comments, blank lines and `# via` notes left out)."""
    with open(path, encoding="utf-8") as fh:
        lines = [line.split(" #")[0].strip() for line in fh]
    return [requirements_module.Requirement(line) for line in lines if line and not line.startswith("#")]


def _environment(python, platform="linux"):
    """PEP 508 marker values for CPython `python` on one platform."""
    system, machine = {"linux": ("Linux", "x86_64"), "darwin": ("Darwin", "arm64"),
                       "win32": ("Windows", "AMD64")}[platform]
    return {"python_version": python, "python_full_version": python + ".2", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "sys_platform": platform, "platform_system": system,
            "platform_machine": machine, "os_name": "nt" if platform == "win32" else "posix", "extra": ""}


def _applies(requirement, environment):
    return requirement.marker is None or requirement.marker.evaluate(environment)


def _pins_for(python, platform="linux"):
    """{name: version} of the lock's lines that apply to CPython `python` on `platform`."""
    environment = _environment(python, platform)
    pins = {}
    for requirement in _requirements(LOCK):
        if _applies(requirement, environment):
            (spec,) = requirement.specifier
            assert requirement.name.lower() not in pins, "%s is pinned twice for %s" % (requirement.name, python)
            pins[requirement.name.lower()] = spec.version
    return pins


def test_every_line_of_the_lock_is_one_exact_version():
    problems = [str(r) for r in _requirements(LOCK)
                if len(r.specifier) != 1 or next(iter(r.specifier)).operator != "=="]
    assert problems == []


def test_the_lock_says_the_command_that_made_it_and_the_in_file_says_it_too():
    with open(LOCK, encoding="utf-8") as fh:
        head = fh.read(400)
    with open(IN, encoding="utf-8") as fh:
        wants = fh.read()
    assert COMMAND in head and COMMAND in wants


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
@pytest.mark.parametrize("python", PYTHONS)
def test_the_lock_pins_every_wanted_package_within_its_range(python, platform):
    """Each line of requirements.in that applies to a Python has exactly one pin there, inside the range
    wanted, so the two files cannot drift apart when one is edited by hand."""
    environment = _environment(python, platform)
    pins = _pins_for(python, platform)
    problems = []
    for want in _requirements(IN):
        if not _applies(want, environment):
            continue
        version = pins.get(want.name.lower())
        if version is None:
            problems.append("%s: not pinned" % want)
        elif not want.specifier.contains(version, prereleases=True):
            problems.append("%s: pinned %s" % (want, version))
    assert problems == []


def test_the_runtime_three_are_setup_cfgs_and_their_pins_are_allowed_by_it():
    """requirements.in says Reticle's runtime dependencies exactly as setup.cfg's install_requires, and
    the version pinned for each Python is one setup.cfg allows (the fast bootstrap installs no package of
    the checkout itself, so this is how the suite gets them)."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(REPO, "setup.cfg"), encoding="utf-8")
    runtime = [requirements_module.Requirement(line.strip())
               for line in parser.get("options", "install_requires").splitlines() if line.strip()]
    assert sorted(r.name for r in runtime) == ["cryptography", "jsonschema", "tornado"]
    wants = {str(r) for r in _requirements(IN)}
    assert {str(r) for r in runtime} <= wants, (runtime, wants)
    problems = []
    for python in PYTHONS:
        pins = _pins_for(python)
        for requirement in runtime:
            if not requirement.specifier.contains(pins[requirement.name], prereleases=True):
                problems.append("%s==%s on %s: setup.cfg says %s" % (requirement.name, pins[requirement.name],
                                                                     python, requirement))
    assert problems == []


def _fresh_install(python, where):
    """Make a virtual environment with `python` at `where` and pip install the lock into it; the
    environment's interpreter and pip's output."""
    subprocess.run([python, "-m", "venv", where], check=True, timeout=120)
    interpreter = os.path.join(where, "bin", "python")
    result = subprocess.run([interpreter, "-m", "pip", "install", "--disable-pip-version-check", "-r", LOCK],
                            capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert not BACKTRACKING.search(output), BACKTRACKING.search(output).group(0) + "\n" + output[-4000:]
    check = subprocess.run([interpreter, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    return interpreter, output


def _other_python(version):
    """An interpreter of CPython `version` on this machine (on PATH, or one pyenv keeps), or None."""
    import glob
    candidates = ["python" + version] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python3"
                                                                            % version)))
    for candidate in candidates:
        try:
            out = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == version:
            return candidate
    return None


# What the suite imports from the lock, by import name; each must import in the fresh environment.
_IMPORTS = ("tornado", "jsonschema", "cryptography", "pytest", "pytest_timeout", "xdist", "hypothesis",
            "packaging", "schemathesis", "django", "flask", "fastapi", "uvicorn", "sqlalchemy",
            "opentelemetry.proto", "opentelemetry.distro", "opentelemetry.instrumentation.flask",
            "opentelemetry.instrumentation.sqlalchemy", "opentelemetry.instrumentation.sqlite3",
            "opentelemetry.exporter.otlp.proto.http", "pymysql", "psycopg")


def test_the_lock_installs_into_a_fresh_environment_of_this_python(tmp_path):
    """A fresh virtual environment (no system site-packages), pip as this machine configures it: the
    pins install without backtracking, pip check is clean, and every package the suite uses imports,
    reticle.py included, with the test tools (mcp, ruff, mypy) runnable; the environment holds nothing
    but what the lock pins (what this machine's interpreter has installed is not seen)."""
    interpreter, _ = _fresh_install(sys.executable, str(tmp_path / "env"))
    listed = subprocess.run([interpreter, "-m", "pip", "list", "--format", "freeze", "--disable-pip-version-check"],
                            capture_output=True, text=True, timeout=120)
    installed = {line.split("==")[0].lower().replace("_", "-") for line in listed.stdout.split()}
    pinned = {name.replace("_", "-") for name in _pins_for("%d.%d" % sys.version_info[:2])}
    assert installed - pinned <= {"pip", "setuptools", "wheel"}, sorted(installed - pinned)
    code = "import %s, mcp, reticle; print(reticle.__version__)" % ", ".join(_IMPORTS)
    result = subprocess.run([interpreter, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for tool in ("ruff", "mypy", "opentelemetry-instrument"):
        assert os.path.exists(os.path.join(str(tmp_path / "env"), "bin", tool)), tool


def test_the_lock_installs_into_a_fresh_environment_of_python_3_9(tmp_path):
    """The oldest CPython Reticle runs on: the pins for 3.9 install together and what the suite uses
    there imports (the mcp SDK and mypy need 3.10, and the lock leaves them out)."""
    python = _other_python("3.9")
    if python is None:
        pytest.skip("no CPython 3.9 on this machine")
    interpreter, _ = _fresh_install(python, str(tmp_path / "env39"))
    code = "import %s, reticle; print(reticle.__version__)" % ", ".join(_IMPORTS)
    result = subprocess.run([interpreter, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_every_pin_for_python_3_14_has_a_wheel(tmp_path):
    """CPython 3.14, the newest the README claims, may not be on this machine: pip finds a CPython 3.14
    wheel of every release the lock pins there (its markers evaluated for 3.14 here, since pip evaluates
    a requirements file's markers for the running interpreter) and downloads it, installing nothing. The pins
    themselves were resolved together for 3.14 by the command the lock names."""
    pins = _pins_for("3.14")
    flat = tmp_path / "pins-3.14.txt"
    flat.write_text("".join("%s==%s\n" % pin for pin in sorted(pins.items())), encoding="utf-8")
    wheels = tmp_path / "wheels"
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                             "--only-binary=:all:", "--python-version", "3.14", "--implementation", "cp",
                             "-d", str(wheels), "-r", str(flat)], capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    names = sorted(name.split("-")[0].lower().replace("_", "-") for name in os.listdir(str(wheels)))
    assert names == sorted(name.replace("_", "-") for name in pins), names
    for name in os.listdir(str(wheels)):
        tags = name[:-len(".whl")].split("-")[-3:]
        assert tags[0] in ("py3", "cp314", "py2.py3") or tags[1] == "abi3", name
