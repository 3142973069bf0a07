"""Run a test command several times in a row on a machine loaded on purpose, and say how each run ended.

    python3 tools/loaded_suite.py [--runs 3] [--burners N] -- COMMAND ...

Starts N CPU-bound processes (default: one per core) before the first run and stops them after the last,
whatever happens; prints each run's closing line (pytest's summary) and its time.  Races that an idle
machine hides (a record that lands after the verdict, a finaliser that runs in another test) show here.
Standard library only."""

import argparse
import os
import signal
import subprocess
import sys
import time

BURN = "import signal, sys; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\nwhile True:\n    pass\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--log", default="loaded-run-%d.log", help="each run's output (%%d: the run's number)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    # stopped by SIGTERM (or SIGINT, which a background job ignores): the run in progress and the burners end too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    failed = 0
    try:
        for n in range(1, args.runs + 1):
            started = time.monotonic()
            with open(args.log % n, "w") as log:
                rc = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
            with open(args.log % n) as log:
                lines = [line.rstrip() for line in log if line.strip()]
            summary = next((line for line in reversed(lines) if " in " in line and ("passed" in line or "failed"
                                                                                     in line)), lines[-1:] or "")
            failures = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
            print("run %d: exit %d in %.0f s, %d burner(s): %s" % (n, rc, time.monotonic() - started, len(burners),
                                                                  summary), flush=True)
            for line in failures:
                print("    " + line, flush=True)
            failed += rc != 0
    finally:
        for p in burners:
            p.terminate()
        for p in burners:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
