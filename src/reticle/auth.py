"""Saved logins.

A flow's saved login state (cookies and storage, per origin): where it is kept, saving, loading and
expiry.
"""

from __future__ import annotations

import datetime
import os
import secrets
import time
from typing import Optional

from .daemon import _Daemon
from .devices import _device_read_state
from .errors import _CdpError, ToolError
from .flow_files import _flow_name, _load_flow_file, _project_dir
from .tab import _BrowserSession
from .util import _dumps


# ---- logged-in starts: a setup flow's saved state (.reticle/auth/<name>.json) ----
# A flow marked `"setup": true` that ends yes in a device saves the browser context's cookies and its
# origin's storage under its own name; a flow with `"auth": NAME` (and reticle_open {auth}) starts from
# it.  The file is the project's secret: mode 0600, its folder git-ignored, its contents never in an
# answer, a log line or an error message.

def _auth_path(root: str, name: str) -> str:
    """The saved state of setup flow `name`, refused through symbolic links as a flow's file is."""
    name = _flow_name(name)
    folder = os.path.join(root, ".reticle", "auth")
    for part in (os.path.dirname(folder), folder, os.path.join(folder, name + ".json")):
        if os.path.islink(part):
            raise ToolError("%s is a symbolic link; Reticle keeps saved logins only in the project's own "
                            ".reticle/auth" % part, "replace the link with a folder (or file) of the project",
                            setup=True, code="path_refused")
    return os.path.join(folder, name + ".json")


def _save_auth_state(root: str, name: str, state: dict) -> str:
    """Write a setup flow's state atomically, mode 0600, in a folder that git ignores (its own
    .gitignore, written when the folder is made) -> the path."""
    path = _auth_path(root, name)
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    ignore = os.path.join(folder, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as fh:
            fh.write("# saved logins of Reticle's setup flows (cookies, storage): never commit them\n*\n")
    saved = dict(state, name=name, savedAt=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    tmp = path + ".tmp-%s" % secrets.token_hex(3)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(_dumps(saved).encode("utf-8"))
    os.replace(tmp, path)
    return path


def _load_auth_state(root: str, name: str) -> Optional[dict]:
    """A setup flow's saved state, or None when there is none; a file that is not one is a setup
    error (its contents are never quoted)."""
    path = _auth_path(root, name)
    try:
        state = _load_flow_file(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ToolError("the saved auth state %s is not readable (%s)" % (path, type(exc).__name__),
                        "delete it and replay the setup flow %s" % name, setup=True, code="auth_invalid") from None
    if not isinstance(state, dict) or not isinstance(state.get("cookies"), list):
        raise ToolError("the saved auth state %s is not one Reticle wrote" % path,
                        "delete it and replay the setup flow %s" % name, setup=True, code="auth_invalid")
    return state


def _auth_expired(state: dict, now: Optional[float] = None) -> int:
    """How many of a saved state's cookies have expired (a session cookie never does here)."""
    now = time.time() if now is None else now
    return sum(1 for c in state["cookies"] if isinstance(c, dict) and isinstance(c.get("expires"), (int, float))
               and 0 < c["expires"] < now)


async def _keep_auth(hub: _Daemon, session: "_BrowserSession", name: str) -> dict:
    """Save the state of the device behind `session` as setup flow `name`'s -> what an answer may say
    of it (the name, the file, how many cookies and which origins; never a value)."""
    device = hub.devices.for_session(session.id)
    if device is None:
        return {"name": name, "saved": False,
                "note": "a setup flow's state is saved from a device only: open the app with reticle_open"}
    try:
        state = await _device_read_state(device)
    except _CdpError as exc:
        return {"name": name, "saved": False, "note": "the device's state could not be read (%s)" % exc}
    path = _save_auth_state(_project_dir(hub), name, state)
    return {"name": name, "saved": True, "path": path, "cookies": len(state["cookies"]),
            "origins": [o["origin"] for o in state["origins"]]}
