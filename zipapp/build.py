#!/usr/bin/env python3
"""Build dist/reticle.pyz: reticle.py plus pinned wheels, runnable with nothing but CPython.

Standard library only.  Usage (from the repository root)::

    python zipapp/build.py                      # this platform, CPython 3.9 to 3.14
    python zipapp/build.py --all-platforms      # + Linux x86_64/aarch64, macOS, Windows
    python zipapp/build.py --python 3.11 --python 3.12 --out /tmp/r.pyz

The versions come from zipapp/pins.txt.  Wheels are found through PyPI's JSON simple API,
checked against the sha256 it publishes, and kept in zipapp/.wheels/ (or --wheel-cache) so
later builds work offline.  Inside the archive every wheel becomes one directory under _w/,
shared by all the targets that use it, and __main__.py (zipapp/bootstrap.py with the build
table filled in) picks the directories for the platform and CPython it runs on.  The result is
run once under ``python -I`` as a self-check when this interpreter is one of the targets.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipapp
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
INDEX = "https://pypi.org/simple/%s/"

# key -> (sys_platform, platform_machine, platform tag pattern).  The pattern's groups give
# the minimum OS version the wheel needs; the lowest one wins so the pyz runs on old systems.
PLATFORMS = {
    "linux-x86_64": ("linux", "x86_64", r"many(?:linux_(\d+)_(\d+)|linux(1|2010|2014))_x86_64"),
    "linux-aarch64": ("linux", "aarch64", r"many(?:linux_(\d+)_(\d+)|linux(1|2010|2014))_aarch64"),
    "macos-arm64": ("darwin", "arm64", r"macosx_(\d+)_(\d+)_(arm64|universal2)"),
    "macos-x86_64": ("darwin", "x86_64", r"macosx_(\d+)_(\d+)_(x86_64|universal2|intel)"),
    "windows-amd64": ("win32", "AMD64", r"win_amd64"),
}
LEGACY_MANYLINUX = {"1": (2, 5), "2010": (2, 12), "2014": (2, 17)}

# Packages whose compiled part is optional: the native module is dropped and one copy of the
# pure package serves every platform.  tornado falls back to pure Python for its speedups.
DROP_NATIVE = {"tornado"}
# Of cffi only the compiled backend is needed (cryptography's Rust module imports it).
KEEP_ONLY = {"cffi": ("_cffi_backend.",)}
# Trees that are never needed at run time.
DROP_TREES = ("tornado/test/", "tornado/testing.py", "jsonschema/tests/", "jsonschema/benchmarks/",
              "referencing/tests/", "jsonschema_specifications/tests/", "rpds/tests/", "cryptography/hazmat/tests/")
DROP_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


def log(message):
    sys.stderr.write("build: %s\n" % message)


def host_platform():
    """The PLATFORMS key of the machine running the build, or None."""
    machine = os.uname().machine if hasattr(os, "uname") else ""
    if sys.platform.startswith("linux"):
        return {"x86_64": "linux-x86_64", "aarch64": "linux-aarch64"}.get(machine)
    if sys.platform == "darwin":
        return {"arm64": "macos-arm64", "x86_64": "macos-x86_64"}.get(machine)
    if sys.platform == "win32":
        return "windows-amd64"
    return None


# -- pins and markers -----------------------------------------------------------------------

_MARKER = re.compile(r'^\s*(python_version|sys_platform|platform_machine)\s*'
                     r'(==|!=|>=|<=|<|>)\s*"([^"]*)"\s*$')


def parse_pins(path):
    """[(name, version, marker or "")] from pins.txt."""
    pins = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            requirement, _, marker = line.partition(";")
            name, sep, version = requirement.partition("==")
            if not sep or not re.match(r"^[A-Za-z0-9._-]+$", name.strip()):
                raise SystemExit("%s:%d: expected name==version" % (path, number))
            for clause in marker.split(" and ") if marker.strip() else ():
                if not _MARKER.match(clause):
                    raise SystemExit("%s:%d: unsupported marker %r" % (path, number, clause))
            pins.append((canonical(name), version.strip(), marker.strip()))
    return pins


def canonical(name):
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _vtuple(text):
    return tuple(int(part) for part in text.split("."))


def marker_holds(marker, environment):
    for clause in marker.split(" and ") if marker else ():
        variable, op, value = _MARKER.match(clause).groups()
        left, right = environment[variable], value
        if variable == "python_version":
            left, right = _vtuple(left), _vtuple(right)
        elif op not in ("==", "!="):
            raise SystemExit("marker %r: only == and != compare strings" % clause)
        result = {
            "==": left == right, "!=": left != right, ">=": left >= right,
            "<=": left <= right, "<": left < right, ">": left > right,
        }[op]
        if not result:
            return False
    return True


def pins_for(pins, platform_key, python):
    sys_platform, machine, _ = PLATFORMS[platform_key]
    environment = {"python_version": python, "sys_platform": sys_platform,
                   "platform_machine": machine}
    chosen = {}
    for name, version, marker in pins:
        if marker_holds(marker, environment):
            if name in chosen:
                raise SystemExit("pins.txt: two pins for %s on %s/%s" % (name, platform_key, python))
            chosen[name] = version
    return chosen


# -- the index and the wheel cache ------------------------------------------------------------

def _fetch(url, accept=None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()


def release_files(name, version, cache):
    """The index entries (filename, url, sha256) of name==version's wheels; cached on disk."""
    path = os.path.join(cache, "index", "%s-%s.json" % (name, version))
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    log("looking up %s %s on PyPI" % (name, version))
    page = json.loads(_fetch(INDEX % name, "application/vnd.pypi.simple.v1+json"))
    files = []
    for item in page["files"]:
        parsed = parse_wheel_name(item["filename"])
        if parsed and canonical(parsed["name"]) == name and parsed["version"] == version:
            if not item.get("yanked"):
                files.append({"filename": item["filename"], "url": item["url"],
                              "sha256": item["hashes"]["sha256"]})
    if not files:
        raise SystemExit("PyPI has no wheels of %s==%s" % (name, version))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(files, handle, indent=1)
    os.replace(path + ".tmp", path)
    return files


def download(entry, cache):
    """Path of the wheel in the cache, downloaded and checked against its sha256."""
    path = os.path.join(cache, entry["filename"])
    if os.path.exists(path) and _sha256(path) == entry["sha256"]:
        return path
    log("downloading %s" % entry["filename"])
    data = _fetch(entry["url"])
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise SystemExit("sha256 mismatch for %s: got %s, PyPI says %s"
                         % (entry["filename"], digest, entry["sha256"]))
    with open(path + ".tmp", "wb") as handle:
        handle.write(data)
    os.replace(path + ".tmp", path)
    return path


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- choosing wheels --------------------------------------------------------------------------

def parse_wheel_name(filename):
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    return {"name": parts[0], "version": parts[1], "python": parts[-3].split("."),
            "abi": parts[-2].split("."), "platform": parts[-1].split(".")}


def python_rank(wheel, python):
    """How well a wheel's python/abi tags fit CPython `python`: 0 = not at all."""
    want = "cp" + python.replace(".", "")
    minor = int(python.split(".")[1])
    best = 0
    for tag in wheel["python"]:
        for abi in wheel["abi"]:
            if abi == "none" and tag in ("py3", "py2.py3") + tuple("py3%d" % n for n in range(minor + 1)):
                best = max(best, 1)
            elif abi == "abi3" and re.match(r"^cp3\d+$", tag) and int(tag[3:]) <= minor:
                best = max(best, 2)
            elif tag == want and abi == want:
                best = max(best, 3)
    return best


def platform_need(wheel, platform_key):
    """The OS version a wheel needs on platform_key (a tuple; () for any), or None if it
    does not run there."""
    pattern = PLATFORMS[platform_key][2]
    best = None
    for tag in wheel["platform"]:
        if tag == "any":
            return ()
        match = re.fullmatch(pattern, tag)
        if not match:
            continue
        groups = match.groups()
        if platform_key.startswith("linux"):
            need = (int(groups[0]), int(groups[1])) if groups[0] else LEGACY_MANYLINUX[groups[2]]
        elif platform_key.startswith("macos"):
            # Prefer the single-architecture wheel over universal2 (it is half the size).
            need = (int(groups[0]), int(groups[1]), groups[2] == "universal2")
        else:
            need = ()
        if best is None or need < best:
            best = need
    return best


def choose(files, name, platform_key, python, already):
    """Pick the wheel of one pin for one target.  `already` holds wheels picked for other
    targets; an abi3 or pure one that fits is reused so each is packed once."""
    candidates = []
    for entry in files:
        wheel = parse_wheel_name(entry["filename"])
        rank = python_rank(wheel, python)
        if not rank:
            continue
        need = platform_need(wheel, platform_key)
        if name in DROP_NATIVE:
            # Any wheel will do once its native module is dropped; prefer this platform's so
            # that the wheel cache can also install a plain environment here.
            need = (0,) if need is None else ()
        elif need is None:
            continue
        reused = entry["filename"] in already
        # Reuse first, then the better python fit (exact > abi3 > pure), then the newest abi3
        # tag, then the oldest OS requirement.
        tag_age = max((int(t[3:]) for t in wheel["python"] if re.match(r"^cp3\d+$", t)), default=0)
        candidates.append(((reused, rank, tag_age), need, entry))
    if not candidates:
        return None
    best_key = max(c[0] for c in candidates)
    fitting = [c for c in candidates if c[0] == best_key]
    fitting.sort(key=lambda c: (c[1], c[2]["filename"]))
    return fitting[0][2], fitting[0][1]


# -- staging -----------------------------------------------------------------------------------

def unpack(wheel_path, name, target):
    """Unpack one wheel into target, dropping what is never needed at run time."""
    with zipfile.ZipFile(wheel_path) as archive:
        for info in archive.infolist():
            member = info.filename
            if member.endswith("/"):
                continue
            head = member.split("/", 1)[0]
            if head.endswith(".data"):
                rest = member.split("/", 2)
                if len(rest) < 3 or rest[1] not in ("purelib", "platlib"):
                    continue
                member = rest[2]
                head = member.split("/", 1)[0]
            if member.startswith(DROP_TREES) or "/__pycache__/" in "/" + member:
                continue
            if head.endswith(".dist-info"):
                if member.rsplit("/", 1)[-1] in DROP_FILES:
                    continue
                if name in KEEP_ONLY and "licen" not in member.lower():
                    continue
            elif name in KEEP_ONLY and not member.startswith(KEEP_ONLY[name]):
                continue
            elif name in DROP_NATIVE and member.endswith((".so", ".pyd", ".dylib")):
                continue
            parts = member.split("/")
            if ".." in parts or member.startswith("/"):
                raise SystemExit("%s: unsafe path %s" % (wheel_path, member))
            path = os.path.join(target, *parts)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with archive.open(info) as source, open(path, "wb") as sink:
                shutil.copyfileobj(source, sink)


def strip_native(root, tool):
    """Drop symbols that no loader needs from the ELF extensions under root.

    Wheels ship their .so files unstripped (cryptography's is 14 MB, 2.8 MB of it
    symbols); ``strip --strip-unneeded`` keeps the dynamic symbol table, so the
    modules import exactly as before.  A file the tool cannot handle (another
    architecture) is kept as it was.  Returns the bytes saved.
    """
    saved = 0
    for folder, _, files in os.walk(root):
        for filename in files:
            if not (filename.endswith(".so") or ".so." in filename):
                continue
            path = os.path.join(folder, filename)
            with open(path, "rb") as handle:
                if handle.read(4) != b"\x7fELF":
                    continue
            before = os.path.getsize(path)
            result = subprocess.run([tool, "--strip-unneeded", path], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            if result.returncode != 0:
                log("kept %s unstripped (%s)" % (filename, result.stderr.decode(errors="replace").strip()[:80]))
                continue
            saved += before - os.path.getsize(path)
    return saved


def dir_name(name, wheel_filename):
    """The directory a wheel gets under _w/: name-version for pure ones (and those made pure),
    the full wheel stem otherwise."""
    wheel = parse_wheel_name(wheel_filename)
    if name in DROP_NATIVE or wheel["platform"] == ["any"]:
        return "%s-%s" % (name, wheel["version"])
    return wheel_filename[:-4]


def reticle_version(path):
    with open(path, encoding="utf-8") as handle:
        match = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', handle.read(), re.M)
    if not match:
        raise SystemExit("%s: no __version__ = \"...\" line" % path)
    return match.group(1)


def tree_digest(stage):
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(stage):
        dirs.sort()
        for filename in sorted(files):
            path = os.path.join(folder, filename)
            digest.update(os.path.relpath(path, stage).replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest


def build(args):
    reticle = os.path.abspath(args.reticle)
    if not os.path.exists(reticle):
        raise SystemExit("no reticle.py at %s (use --reticle)" % reticle)
    version = reticle_version(reticle)
    pins = parse_pins(args.pins)
    if args.all_platforms:
        platform_keys = list(PLATFORMS)
    elif args.platform:
        platform_keys = args.platform
    else:
        platform_keys = [host_platform()]
        if platform_keys == [None]:
            raise SystemExit("this machine's platform is not one build.py knows; use --platform")
    pythons = sorted(set(args.python or PYTHONS), key=_vtuple)
    os.makedirs(args.wheel_cache, exist_ok=True)

    # Choose every wheel first, so that gaps are reported together before anything is packed.
    targets = {}
    glibc = {}
    wheels = {}  # dir name -> (pin name, wheel path)
    picked = set()
    missing = []
    for platform_key in platform_keys:
        for python in pythons:
            dirs = []
            for name, pin in sorted(pins_for(pins, platform_key, python).items()):
                files = release_files(name, pin, args.wheel_cache)
                result = choose(files, name, platform_key, python, picked)
                if result is None:
                    missing.append("%s==%s has no wheel for %s/CPython %s" % (name, pin, platform_key, python))
                    continue
                entry, need = result
                picked.add(entry["filename"])
                directory = dir_name(name, entry["filename"])
                wheels.setdefault(directory, (name, entry))
                dirs.append(directory)
                if platform_key.startswith("linux") and need and name not in DROP_NATIVE:
                    old = glibc.get(platform_key, (0, 0))
                    glibc[platform_key] = max(old, need)
            if len(dirs) == len(pins_for(pins, platform_key, python)):
                targets.setdefault(platform_key, {})["cp" + python.replace(".", "")] = dirs
    for line in missing:
        log("skipped: " + line)
    if missing and args.strict:
        raise SystemExit("some targets have no wheel (see above) and --strict was given")
    if not targets:
        raise SystemExit("nothing to build")

    stage = tempfile.mkdtemp(prefix="reticle-pyz-")
    try:
        strip_tool = None if args.no_strip else shutil.which("strip")
        saved = 0
        for directory, (name, entry) in sorted(wheels.items()):
            path = download(entry, args.wheel_cache)
            unpack(path, name, os.path.join(stage, "_w", directory))
            if strip_tool and "linux" in directory:
                saved += strip_native(os.path.join(stage, "_w", directory), strip_tool)
        if strip_tool:
            log("stripped symbols from the Linux extensions: %d bytes fewer before compression" % saved)
        elif not args.no_strip:
            log("no `strip` on PATH: the Linux extensions keep their symbols (a larger pyz)")
        shutil.copyfile(reticle, os.path.join(stage, "reticle.py"))
        with open(os.path.join(HERE, "bootstrap.py"), encoding="utf-8") as handle:
            bootstrap = handle.read()
        digest = tree_digest(stage)
        digest.update(bootstrap.encode())
        table = {
            "id": digest.hexdigest()[:12],
            "version": version,
            "targets": targets,
            "glibc": {key: "%d.%d" % need for key, need in sorted(glibc.items())},
        }
        line = "_BUILD = None\n"
        if bootstrap.count(line) != 1:
            raise SystemExit("bootstrap.py must contain exactly one %r line" % line)
        bootstrap = bootstrap.replace(line, "_BUILD = %s\n" % json.dumps(table, sort_keys=True))
        with open(os.path.join(stage, "__main__.py"), "w", encoding="utf-8") as handle:
            handle.write(bootstrap)
        out = os.path.abspath(args.out)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        zipapp.create_archive(stage, out + ".tmp", interpreter="/usr/bin/env python3",
                              compressed=True)
        os.replace(out + ".tmp", out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)

    for platform_key, by_python in sorted(targets.items()):
        log("%s: %s" % (platform_key, " ".join(sorted(by_python, key=lambda t: int(t[2:])))))
    log("wrote %s (%d bytes, build %s)" % (out, os.path.getsize(out), table["id"]))
    if not args.no_check:
        self_check(out, version, targets)
    return out


def self_check(out, version, targets):
    tag = "cp%d%d" % sys.version_info[:2]
    if tag not in targets.get(host_platform() or "", {}):
        log("self-check skipped: %s is not among the targets" % tag)
        return
    cache = tempfile.mkdtemp(prefix="reticle-check-")
    try:
        environment = dict(os.environ, RETICLE_CACHE_DIR=cache)
        result = subprocess.run([sys.executable, "-I", out, "--version"], env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, timeout=120)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if result.returncode != 0 or result.stdout.strip() != version:
        raise SystemExit("self-check failed: python -I %s --version exited %d\n%s%s"
                         % (out, result.returncode, result.stdout, result.stderr))
    log("self-check: python%d.%d -I %s --version -> %s"
        % (sys.version_info[:2] + (os.path.basename(out), version)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "dist", "reticle.pyz"),
                        help="where to write the pyz (default: dist/reticle.pyz)")
    parser.add_argument("--python", action="append", choices=PYTHONS, metavar="X.Y",
                        help="build only for this CPython version (repeatable; default: %s)"
                        % ", ".join(PYTHONS))
    parser.add_argument("--all-platforms", action="store_true",
                        help="build for %s" % ", ".join(PLATFORMS))
    parser.add_argument("--platform", action="append", choices=sorted(PLATFORMS),
                        help="build for this platform (repeatable; default: this machine's)")
    parser.add_argument("--reticle", default=os.path.join(ROOT, "reticle.py"),
                        help="the reticle.py to pack (default: the repository's)")
    parser.add_argument("--pins", default=os.path.join(HERE, "pins.txt"))
    parser.add_argument("--wheel-cache", default=os.environ.get("RETICLE_WHEEL_CACHE")
                        or os.path.join(HERE, ".wheels"),
                        help="where downloaded wheels are kept (default: zipapp/.wheels, "
                        "or $RETICLE_WHEEL_CACHE)")
    parser.add_argument("--strict", action="store_true",
                        help="fail instead of skipping a target that a pin has no wheel for")
    parser.add_argument("--no-check", action="store_true", help="skip the self-check run")
    parser.add_argument("--no-strip", action="store_true",
                        help="keep the symbols of the Linux extensions (by default `strip --strip-unneeded` "
                             "runs on them when it is on PATH)")
    build(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
