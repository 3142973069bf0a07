"""The daemon, as its tools see it.

What a tool may ask of the daemon it runs in, as one Protocol: its tabs, devices, faults, journeys and
OpenTelemetry receiver, its state directory and the project it serves, its clock and public origin,
what it refused to a page lately, and the tab a call means.  The Hub is the one there is: it is built
above the tools and hands itself to each of them as this, so that nothing below the Hub imports it.
"""

from __future__ import annotations

import collections
from typing import Awaitable, Protocol

from .bridge import _Bridge
from .calls import _CallContext
from .devices import _DeviceManager
from .faults import _Faults
from .journal import _Journeys
from .otel import _OtelTraces
from .stores import _Stores
from .tab import _BrowserSession
from .util import _StateDir


class _Daemon(Protocol):
    """The daemon as a tool uses it (the Hub)."""

    @property
    def bridge(self) -> _Bridge: ...

    @property
    def devices(self) -> _DeviceManager: ...

    @property
    def faults(self) -> _Faults: ...

    @property
    def journeys(self) -> _Journeys: ...

    @property
    def otel(self) -> _OtelTraces: ...

    @property
    def stores(self) -> _Stores: ...

    @property
    def state(self) -> _StateDir: ...

    @property
    def project_dir(self) -> str: ...

    @property
    def refusals(self) -> collections.deque: ...

    def clock(self) -> float: ...

    def public_origin(self) -> str: ...

    def resolve_tab(self, args: dict, ctx: _CallContext) -> Awaitable[_BrowserSession]: ...
