"""Reticle: a verification layer that lets an AI coding agent prove its change
works in the real, running web app.

An in-page SDK (embedded in this file, served at ``/reticle.js``)
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

Modules (each a module of the package src/reticle/, joined into this file by tools/amalgamate.py, each
after those it imports; ``grep -n '^#: begin' reticle.py`` lists them): constants, errors, events,
util, ... up to the Hub, the HTTP and WebSocket handlers, make_app and the command line.

In your Python app, in development (Server truth): ``app.wsgi_app =
reticle.wsgi(app.wsgi_app)`` (Flask, any WSGI app), ``app = reticle.asgi(app)``
(FastAPI, any ASGI app), or ``"reticle.DjangoMiddleware"`` in ``MIDDLEWARE``.
"""

from __future__ import annotations

from .app import make_app
from .cli import main
from .constants import __version__
from .errors import ConfigError, PredicateError, ReticleError, RpcError, ToolError
from .hub import Hub
from .middleware import DjangoMiddleware, asgi, watch_sqlalchemy, watch_sqlite3, wsgi
from .predicates import parse_predicate

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
