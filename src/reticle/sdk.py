"""The in-page SDK, as served.

The embedded scripts (assets) with what this daemon tells every page filled in: its version, its
limits and the convention tables the SDK shares with the verdict rules (conventions), plus whatever a
device adds of its own (its bridge, relay and tab).  It never holds the pairing token.
"""

from __future__ import annotations

from .assets import _sdk_js
from .constants import BRIDGE_PROTOCOL, WS_MAX_MESSAGE_BYTES, __version__
from .conventions import _sdk_conventions
from .util import _dumps


def _sdk_source(**config: object) -> str:
    """The SDK's text with its config: the daemon's version, protocol, largest frame and convention tables,
    then `config` (a device's own settings)."""
    whole = {"version": __version__, "protocolVersion": BRIDGE_PROTOCOL, "maxMessageBytes": WS_MAX_MESSAGE_BYTES}
    whole.update(config)
    whole["conventions"] = _sdk_conventions()
    return (_sdk_js().replace("__RETICLE_VERSION__", __version__)
            .replace("/*__RETICLE_CONFIG__*/null", _dumps(whole)))
