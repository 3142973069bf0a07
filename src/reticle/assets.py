"""Embedded assets.

The demo page and the in-page SDK, as text.  The build puts each file in where its `#include` line
stands, so the built reticle.py carries them; run unbuilt, from src/ as a package, the same names still
hold the build's marker, and _demo_html() and _sdk_js() read the files it names instead.
"""

from __future__ import annotations

import glob
import os


# _DEMO_HTML: the page `reticle demo` serves (with /api/* answered by
# _DemoApiHandler).  It carries no script tag: the device injects the SDK.
# Planted bugs: "Save profile" shows "Profile saved" although its write
# answers 500; "Add to cart" submits twice; "Load stats" logs an error.

_DEMO_HTML = r"""#include src/assets/demo.html"""


# _SDK_JS: the in-page SDK's scripts, joined in name order; the daemon fills in its version and its
# config (sdk.py: limits, convention tables, a device's settings) when it serves or injects it.

_SDK_JS = r"""#include src/sdk/reticle/*.js"""

_MARKER = "#include "


def _unbuilt(text: str) -> str:
    """An asset's text: itself once built; unbuilt, the file(s) its marker names (a glob joins them in
    name order, each ending with a newline, as the build does)."""
    if not text.startswith(_MARKER):
        return text
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    texts = []
    for path in sorted(glob.glob(os.path.join(root, text[len(_MARKER):]))):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return "".join(t if t.endswith("\n") or len(texts) == 1 else t + "\n" for t in texts)


def _demo_html() -> str:
    """The demo page."""
    return _unbuilt(_DEMO_HTML)


def _sdk_js() -> str:
    """The in-page SDK's scripts, joined."""
    return _unbuilt(_SDK_JS)
