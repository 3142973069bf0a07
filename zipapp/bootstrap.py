# The __main__.py of reticle.pyz.  zipapp/build.py fills in _BUILD and writes this file into the
# archive; it is not meant to be run from the source tree.
#
# What it does, in order:
#   1. Works out which platform and CPython this is, and whether the pyz carries a build for it.
#      If not, it says in one line what it carries and exits 1.
#   2. Finds a private cache directory: $RETICLE_CACHE_DIR, then the platform's cache directory,
#      then <tempdir>/reticle-<uid>.  A directory owned by another user, writable by group or
#      others, or on a noexec mount is refused and the next one is tried.
#   3. On the first run of this build on this interpreter it extracts reticle.py and the
#      dependencies for this platform and CPython into <cache>/<entry>.  It extracts into a
#      temporary sibling and renames it into place, so first runs that race are safe: the one
#      whose rename fails throws its copy away and uses the winner's.  Later runs only stat it.
#   4. Puts that directory first on sys.path and runs reticle.main().
#
# Everything is extracted (not only the native modules), so Python writes __pycache__ there for
# whichever version runs it and importlib.metadata finds the packages' dist-info.
#
# The warm path imports only os and sys; zipfile and tempfile are imported on the first run.

import os
import sys

# Replaced by build.py: {"id": ..., "version": ..., "targets": {platform: {"cpXY": [dirs]}},
# "glibc": {platform: "2.17"}}.
_BUILD = None

_PREFIX = "_w/"


def _fail(message):
    sys.stderr.write("reticle: %s\n" % message)
    sys.exit(1)


def _carried():
    parts = []
    for platform_key in sorted(_BUILD["targets"]):
        pythons = sorted(_BUILD["targets"][platform_key], key=lambda tag: int(tag[2:]))
        parts.append("%s (%s)" % (platform_key, ", ".join(pythons)))
    return "; ".join(parts)


def _platform_key():
    """Return (key, problem): the platform key of this machine, or why it is unsupported."""
    if sys.platform == "win32":
        import platform

        machine = platform.machine().lower()
        machine = {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64"}.get(machine, machine)
        return "windows-" + machine, None
    machine = os.uname().machine.lower()
    if sys.platform == "darwin":
        return "macos-" + ("arm64" if machine in ("arm64", "aarch64") else machine), None
    if sys.platform.startswith("linux"):
        machine = "aarch64" if machine == "arm64" else machine
        try:
            libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
        except (ValueError, OSError):
            libc = ""
        if not libc.startswith("glibc "):
            return "linux-%s-musl" % machine, "needs glibc; this Linux has another C library (musl?)"
        need = _BUILD["glibc"].get("linux-" + machine)
        have = libc.split()[1]
        if need and _version_tuple(have) < _version_tuple(need):
            return "linux-" + machine, "needs glibc %s or newer; this machine has %s" % (need, have)
        return "linux-" + machine, None
    return "%s-%s" % (sys.platform, machine), None


def _version_tuple(text):
    out = []
    for part in text.split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        out.append(int(digits or 0))
    return tuple(out)


def _select():
    """Return (entry name, list of archive dirs) for this interpreter, or exit with one line."""
    python = "cp%d%d" % sys.version_info[:2]
    if sys.version_info < (3, 9):
        _fail(
            "reticle.pyz needs CPython 3.9 or newer; this is Python %d.%d. "
            "This pyz carries: %s" % (sys.version_info[:2] + (_carried(),))
        )
    if sys.implementation.name != "cpython":
        _fail(
            "reticle.pyz needs CPython; this is %s %d.%d. This pyz carries: %s"
            % ((sys.implementation.name,) + sys.version_info[:2] + (_carried(),))
        )
    if "t" in getattr(sys, "abiflags", ""):
        _fail(
            "reticle.pyz needs a CPython with the GIL; this is free-threaded %d.%d. "
            "This pyz carries: %s" % (sys.version_info[:2] + (_carried(),))
        )
    key, problem = _platform_key()
    if problem:
        _fail("this reticle.pyz %s. This pyz carries: %s" % (problem, _carried()))
    dirs = _BUILD["targets"].get(key, {}).get(python)
    if dirs is None:
        _fail(
            "this reticle.pyz has no build for %s/%s. It carries: %s"
            % (key, python, _carried())
        )
    return "%s-%s-%s-%s" % (_BUILD["version"], _BUILD["id"], key, python), dirs


def _unsafe(path):
    """Why path may not hold our code, or None when it is fine (it must exist)."""
    st = os.stat(path)
    if hasattr(os, "getuid"):
        if st.st_uid != os.getuid():
            return "owned by uid %d, not %d" % (st.st_uid, os.getuid())
        if st.st_mode & 0o022:
            return "writable by group or others (mode %o)" % (st.st_mode & 0o777)
    noexec = getattr(os, "ST_NOEXEC", 0)
    if noexec and hasattr(os, "statvfs") and os.statvfs(path).f_flag & noexec:
        return "on a noexec mount"
    return None


def _candidates():
    """(label, root) of each place to try, best first."""
    env = os.environ.get("RETICLE_CACHE_DIR")
    if env:
        yield "RETICLE_CACHE_DIR=" + env, env
    if sys.platform == "win32":
        platform_cache = os.path.join(os.environ.get("LOCALAPPDATA", ""), "reticle", "Cache")
    elif sys.platform == "darwin":
        platform_cache = os.path.expanduser("~/Library/Caches/reticle")
    else:
        base = os.environ.get("XDG_CACHE_HOME")
        if not base or not os.path.isabs(base):
            base = os.path.expanduser("~/.cache")
        platform_cache = os.path.join(base, "reticle")
    # With no HOME (or LOCALAPPDATA) the path stays relative: never unpack into the cwd.
    if os.path.isabs(platform_cache):
        yield "platform cache", platform_cache
    import tempfile

    name = "reticle-%d" % os.getuid() if hasattr(os, "getuid") else "reticle"
    seen = set()
    try:
        temp_dirs = [tempfile.gettempdir()]
    except OSError:
        temp_dirs = []
    if os.name == "posix":
        temp_dirs += ["/tmp", "/var/tmp"]
    for temp in temp_dirs:
        path = os.path.join(temp, name)
        if path not in seen:
            seen.add(path)
            yield "temporary directory", path


def _usable_root(root):
    """Create root (mode 0700) if needed; return why it is unusable, or None."""
    try:
        if not os.path.isdir(root):
            # exist_ok: first runs race here too; whoever made it, _unsafe checks it below
            os.makedirs(root, 0o700, exist_ok=True)
        problem = _unsafe(root)
        if problem is None and not os.access(root, os.W_OK | os.X_OK):
            problem = "not writable"
        return problem
    except OSError as error:
        return error.strerror or str(error)


def _archive_path():
    archive = getattr(__loader__, "archive", None)  # noqa: F821 (set by zipimport)
    return archive or os.path.abspath(sys.argv[0])


def _extract(root, entry, dirs):
    """Extract the entry into root; return its path (ours, or a racing winner's)."""
    import shutil
    import tempfile
    import zipfile

    final = os.path.join(root, entry)
    _sweep(root)
    temp = tempfile.mkdtemp(prefix=".tmp-" + entry[:40] + "-", dir=root)
    try:
        prefixes = tuple(_PREFIX + name + "/" for name in dirs)
        with zipfile.ZipFile(_archive_path()) as archive:
            for info in archive.infolist():
                name = info.filename
                if name == "reticle.py":
                    relative = name
                elif name.startswith(prefixes) and not name.endswith("/"):
                    relative = name.split("/", 2)[2]
                else:
                    continue
                parts = relative.split("/")
                if ".." in parts or relative.startswith("/"):
                    raise OSError("unsafe path in archive: %s" % name)
                target = os.path.join(temp, *parts)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
        try:
            os.rename(temp, final)
        except OSError:
            # Another first run got there first: its directory is complete, use it.
            if not os.path.isdir(final):
                raise
            shutil.rmtree(temp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return final


def _sweep(root, max_age=3600):
    """Remove temporary directories that a first run killed mid-extraction left behind."""
    import shutil
    import time

    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if name.startswith(".tmp-"):
            path = os.path.join(root, name)
            try:
                if time.time() - os.stat(path).st_mtime > max_age:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass


def _prepare():
    entry, dirs = _select()
    tried = []
    for label, root in _candidates():
        problem = _usable_root(root)
        final = os.path.join(root, entry)
        if problem is None and os.path.isdir(final):
            problem = _unsafe(final)
            if problem is None:
                return final
        if problem is None:
            try:
                return _extract(root, entry, dirs)
            except OSError as error:
                problem = "cannot unpack there: %s" % (error.strerror or error)
        tried.append("%s (%s: %s)" % (label, root, problem))
        if label.startswith("RETICLE_CACHE_DIR"):
            sys.stderr.write("reticle: not using %s: %s\n" % (root, problem))
    _fail(
        "no usable cache directory to unpack into; tried %s. "
        "Set RETICLE_CACHE_DIR to a directory only you can write to." % "; ".join(tried)
    )


def _run():
    sys.path.insert(0, _prepare())
    import reticle

    return reticle.main()


if __name__ == "__main__":
    sys.exit(_run())
