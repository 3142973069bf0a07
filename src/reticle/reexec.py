"""Serving from bytecode.

`python reticle.py serve` compiles this whole file from source (a script keeps no bytecode cache),
and the compiler's garbage, freed before the imports fill the holes it leaves, keeps the daemon some
25 MB above its dependencies for as long as it runs.  So before importing anything more, the daemon hands
the code object it runs to a fresh interpreter (an anonymous in-memory file, then exec in the same
process: same pid, same descriptors), which starts from that bytecode with a clean heap.  Linux only
(memfd); RETICLE_SERVE_REEXEC=0 turns it off.  In the built reticle.py this block runs before the
third-party imports; as a package module it never fires (its __name__ is not __main__).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any


_REEXEC_STUB = ("import marshal, os, sys\n"
                "with os.fdopen(int(sys.argv[1]), 'rb') as fh: code = marshal.loads(fh.read())\n"
                "del sys.argv[:2]; sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
                "import __main__; vars(__main__).update(__file__=sys.argv[0], __reticle_bytecode__=True)\n"
                "del fh; exec(code, vars(__main__))\n")


def _serve_from_bytecode(code: Any) -> None:
    """Exec a fresh interpreter that runs `code` (this module's) as __main__ with the same arguments."""
    import marshal  # stdlib; the daemon start is its one user
    try:
        fd = os.memfd_create("reticle-bytecode")
        data = memoryview(marshal.dumps(code))
        while data:
            data = data[os.write(fd, data):]
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]  # -W, -X, -O ...
        os.execv(sys.executable, [sys.executable] + flags + ["-c", _REEXEC_STUB, str(fd)] + sys.argv)
    except (OSError, ValueError, AttributeError):
        return  # cannot: run on from the compiled source as before


if (__name__ == "__main__" and sys.argv[1:2] == ["serve"] and hasattr(os, "memfd_create")
        and not globals().get("__reticle_bytecode__") and os.environ.get("RETICLE_SERVE_REEXEC", "1") != "0"
        and sys.executable and os.path.isfile(sys.argv[0])):
    _serve_from_bytecode(sys._getframe(0).f_code)
