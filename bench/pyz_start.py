#!/usr/bin/env python3
"""Start-up cost of reticle.pyz beside a plain virtual environment.

Prints the pyz size, the cold first-run time (an empty cache every run), the warm start time
(cache already filled), how long `serve` takes to answer its first /status (the pyz and
reticle.py; issue 2 wants well under a second) and, as the baseline, ``reticle --version`` in a virtual environment
where reticle.py and the same pinned wheels are installed.  Each number is the median of several
runs of the whole process (wall clock), with the fastest run beside it.  Prints numbers; it
asserts nothing.

    python bench/pyz_start.py                   # builds dist/reticle.pyz first if missing
    python bench/pyz_start.py --runs 11 --python /usr/bin/python3.12 --pyz /tmp/reticle.pyz

Targets from issue 5: under 8 MB for one platform, warm within 10% of the plain venv, cold
under 1.5 s.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import socket
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "zipapp"))
import build as zipapp_build  # noqa: E402

del sys.path[0]


def timed(argv, env, before=None):
    """Wall-clock milliseconds of one run; raises if it fails."""
    if before:
        before()
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if result.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (" ".join(argv), result.stderr.decode(errors="replace")))
    return elapsed


def measure(runs, *commands):
    """Run the commands in turn, `runs` rounds, so that a slow spell of the machine hits all of
    them alike.  Each command is (argv, env, before).  Returns [(median, fastest)]."""
    samples = [[] for _ in commands]
    for _ in range(runs):
        for index, (argv, env, before) in enumerate(commands):
            samples[index].append(timed(argv, env, before))
    return [(statistics.median(s), min(s)) for s in samples]


def serve_ready(argv, env, runs):
    """Median and fastest wall-clock ms from starting `argv + serve --port N` to its first /status
    answer, over `runs` starts, each on a new state folder; the daemon is stopped after each."""
    samples = []
    for _ in range(runs):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        state = tempfile.mkdtemp(prefix="reticle-bench-state-")
        start = time.perf_counter()
        proc = subprocess.Popen(argv + ["serve", "--port", str(port)], env=dict(env, RETICLE_STATE_DIR=state),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while proc.poll() is None:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/status" % port, timeout=2):
                        break
                except OSError:
                    time.sleep(0.005)
            else:
                raise SystemExit("%s serve exited with %s" % (" ".join(argv), proc.returncode))
            samples.append((time.perf_counter() - start) * 1000)
        finally:
            proc.terminate()
            proc.wait(10)
            shutil.rmtree(state, ignore_errors=True)
    return statistics.median(samples), min(samples)


def plain_venv(python, folder, wheel_cache):
    """A venv with the pins for `python` installed from the wheel cache (offline)."""
    venv = os.path.join(folder, "venv")
    subprocess.run([python, "-m", "venv", venv], check=True, stdout=subprocess.DEVNULL)
    venv_python = os.path.join(venv, "bin", "python")
    version = subprocess.run([venv_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    platform_key = zipapp_build.host_platform()
    pins = zipapp_build.pins_for(zipapp_build.parse_pins(os.path.join(REPO, "zipapp", "pins.txt")),
                                 platform_key, version)
    requirements = ["%s==%s" % item for item in sorted(pins.items())]
    command = [venv_python, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:",
               "--find-links", wheel_cache] + requirements
    if subprocess.run(command + ["--no-index"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return venv_python


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pyz", default=os.path.join(REPO, "dist", "reticle.pyz"))
    parser.add_argument("--python", default=sys.executable, help="the interpreter to time")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--wheel-cache", default=os.path.join(REPO, "zipapp", ".wheels"))
    args = parser.parse_args(argv)

    if not os.path.exists(args.pyz):
        zipapp_build.main(["--out", args.pyz, "--wheel-cache", args.wheel_cache])
    folder = tempfile.mkdtemp(prefix="reticle-bench-")
    try:
        home = os.path.join(folder, "home")
        cache = os.path.join(folder, "cache")
        os.mkdir(home)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
               "RETICLE_CACHE_DIR": cache}
        # Both sides run from a virtual environment, so the base interpreter's site-packages
        # (and its .pth files) cost neither of them anything: the pyz from an empty one.
        empty = os.path.join(folder, "empty")
        subprocess.run([args.python, "-m", "venv", "--without-pip", empty], check=True)
        pyz_argv = [os.path.join(empty, "bin", "python"), "-I", args.pyz, "--version"]
        venv_python = plain_venv(args.python, folder, args.wheel_cache)
        # Installed the way pip installs it, run the way the console script runs it (so its
        # bytecode is cached, as it is inside the pyz's cache).
        purelib = subprocess.run([venv_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
        shutil.copyfile(os.path.join(REPO, "reticle.py"), os.path.join(purelib, "reticle.py"))
        venv_argv = [venv_python, "-I", "-c", "import sys; from reticle import main; sys.exit(main())",
                     "--version"]

        def empty_cache():
            shutil.rmtree(cache, ignore_errors=True)

        timed(venv_argv, env)
        [cold] = measure(args.runs, (pyz_argv, env, empty_cache))
        timed(pyz_argv, env)
        warm, venv = measure(args.runs, (pyz_argv, env, None), (venv_argv, env, None))

        ready_pyz = serve_ready(pyz_argv[:-1], env, args.runs)
        ready_py = serve_ready([args.python, "-I", os.path.join(REPO, "reticle.py")], env, args.runs)

        version = subprocess.run([args.python, "-c", "import sys; print(sys.version.split()[0])"],
                                 stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
        size = os.path.getsize(args.pyz)
        extracted = sum(os.path.getsize(os.path.join(d, f))
                        for d, _, files in os.walk(cache) for f in files)
        rows = [
            ("pyz", "%s  %s bytes (%.2f MiB)" % (args.pyz, format(size, ","), size / 2 ** 20)),
            ("interpreter", "CPython %s  %s" % (version, args.python)),
            ("runs", "%d per row; wall-clock ms, median (fastest)" % args.runs),
            ("pyz cold first run", "%6.0f  (%.0f)" % cold),
            ("pyz warm start", "%6.0f  (%.0f)" % warm),
            ("plain venv", "%6.0f  (%.0f)" % venv),
            ("warm / plain venv", "%6.2f" % (warm[0] / venv[0])),
            ("cold / plain venv", "%6.2f" % (cold[0] / venv[0])),
            ("serve ready (pyz)", "%6.0f  (%.0f)" % ready_pyz),
            ("serve ready (reticle.py)", "%6.0f  (%.0f)" % ready_py),
            ("cache on disk", "%.1f MiB" % (extracted / 2 ** 20)),
        ]
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            print("%s  %s" % (label.ljust(width), value))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
