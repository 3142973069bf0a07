"""Embedded assets.

_DEMO_HTML: the page `reticle demo` serves (with /api/* answered by
_DemoApiHandler).  It carries no script tag: the device injects the SDK.
Planted bugs: "Save profile" shows "Profile saved" although its write
answers 500; "Add to cart" submits twice; "Load stats" logs an error.
"""

from __future__ import annotations


_DEMO_HTML = r"""#include src/assets/demo.html"""


# _SDK_JS: the in-page SDK, served at GET /reticle.js by _SdkHandler.  The build puts in the
# tables it shares with Python (the failure conventions, route announcers, plain failure text); the
# daemon replaces __RETICLE_VERSION__ and the config token.  It never holds the pairing token.

_SDK_JS = r"""#include src/sdk/reticle/*.js"""
