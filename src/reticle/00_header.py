"""Reticle: a verification layer that lets an AI coding agent prove its change
works in the real, running web app.

An in-page SDK (embedded at the end of this file, served at ``/reticle.js``)
reads program truth -- network, console, errors, routes, DOM, storage, app
state, custom signals -- and streams it over a localhost WebSocket to this
daemon.  The agent talks MCP to the daemon (stdio, HTTP+SSE or Streamable
HTTP), drives the app and asks for a verdict: ``verified: yes | no | unknown``.
``unknown`` is never a pass.

Run it as any of::

    reticle serve                  # installed console script
    python -m reticle serve        # the module
    python reticle.pyz serve       # the single-file zipapp

Vendoring: copy this one file into your package (``host/_vendor/reticle.py``)
and keep this header.  It needs ``tornado``, ``jsonschema`` and
``cryptography`` and nothing else; ``make_app(Hub())`` gives a Tornado
application you can serve yourself.

Sections, in reading order (each is a part of src/reticle/; ``grep -n '^# .*####' reticle.py``):
Constants & logging | Errors | Utilities | Session signing | MCP protocol | Hub |
Events and requests | Browser bridge | Devices | Faults | Predicates | Verdict rules |
Tools | Flows | Tool registry | Server truth | HTTP handlers | WebSocket handler |
Application factory | Server control | Init | CLI | pytest plugin | Embedded assets |
__main__ guard.

In your Python app, in development (Server truth): ``app.wsgi_app =
reticle.wsgi(app.wsgi_app)`` (Flask, any WSGI app), ``app = reticle.asgi(app)``
(FastAPI, any ASGI app), or ``"reticle.DjangoMiddleware"`` in ``MIDDLEWARE``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DjangoMiddleware",
    "Hub",
    "PredicateError",
    "ReticleError",
    "RpcError",
    "ToolError",
    "__version__",
    "asgi",
    "main",
    "make_app",
    "parse_predicate",
    "watch_sqlalchemy",
    "watch_sqlite3",
    "wsgi",
]

import argparse
import asyncio
import array
import base64
import bisect
import collections
import concurrent.futures
import contextvars
import datetime
import errno
import hashlib
import hmac
import html
import itertools
import ipaddress
import json
import logging
import math
import operator
import os
import re
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from typing import Any
from typing import Awaitable
from typing import Callable
from typing import Dict
from typing import FrozenSet
from typing import Iterator
from typing import List
from typing import NamedTuple
from typing import Literal
from typing import Optional
from typing import Set
from typing import Tuple
from typing import overload
from typing import TYPE_CHECKING


# `python reticle.py serve` compiles this whole file from source (a script keeps no bytecode cache),
# and the compiler's garbage, freed before the imports below fill the holes it leaves, keeps the daemon
# some 25 MB above its dependencies for as long as it runs.  So before importing anything more, the
# daemon hands the code object it runs to a fresh interpreter (an anonymous in-memory file, then exec
# in the same process: same pid, same descriptors), which starts from that bytecode with a clean heap.
# Linux only (memfd); RETICLE_SERVE_REEXEC=0 turns it off.  Only this block runs before the imports.
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

# The third-party imports come after the re-exec block on purpose: `reticle serve` re-execs itself from
# bytecode before paying for tornado, jsonschema and cryptography, so they are not at the top (E402).
import tornado.http1connection  # noqa: E402
import tornado.httpclient  # noqa: E402
import tornado.httpserver  # noqa: E402
import tornado.ioloop  # noqa: E402
import tornado.iostream  # noqa: E402
import tornado.netutil  # noqa: E402
import tornado.routing  # noqa: E402
import tornado.web  # noqa: E402
import tornado.websocket  # noqa: E402
import jsonschema  # noqa: E402
from cryptography.hazmat.primitives import hashes as _c_hashes  # noqa: E402
from cryptography.hazmat.primitives import hmac as _c_hmac  # noqa: E402
