"""Flow files.

Flows on disk: their names, paths, format checks, reading (bounded, regular files only) and listing.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any, Dict, List, Protocol

import jsonschema

from .constants import FLOW_MAX_STEPS
from .errors import ToolError
from .toolbox import _ACTIONS, _ACT_ARGS, _PREDICATE, _SCHEMA_DIALECT, _TARGET
from .util import _loads, _short


class _Project(Protocol):
    """Whatever knows the project a daemon serves (the Hub: RETICLE_PROJECT_DIR, else where it started)."""

    @property
    def project_dir(self) -> str: ...


FLOW_FORMAT = 1                      # the "format" field of a flow file
REPLAY_WAIT_MS = 3000                # an assert replayed right after its act waits this long at most
_FLOW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SECRET_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")   # every ${NAME}; only RETICLE_SECRET_* is read
_SECRET_NAME = re.compile(r"^RETICLE_SECRET_[A-Z0-9_]{1,64}$")

_FLOW_STEP = {
    "type": "object",
    "properties": {
        "action": {"enum": _ACTIONS}, "target": _TARGET, "args": _ACT_ARGS,
        "until": _PREDICATE, "assert": _PREDICATE,
        "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
        "verified": {"enum": ["yes", "no", "unknown"]}, "secret": {"type": "string"},
        "secretOrigin": {"type": "string", "maxLength": 4096},
        "expect": {"enum": ["yes", "no"]},
    },
    "additionalProperties": False,
}
_FLOW_FILE = {
    "$schema": _SCHEMA_DIALECT, "type": "object",
    "required": ["format", "name", "steps"],
    "properties": {
        "format": {"const": FLOW_FORMAT}, "name": {"type": "string"}, "savedAt": {"type": "string"},
        "startUrl": {"type": "string"}, "note": {"type": "string"},
        "setup": {"type": "boolean"}, "auth": {"type": "string", "pattern": _FLOW_NAME.pattern},
        "steps": {"type": "array", "items": _FLOW_STEP, "minItems": 1, "maxItems": FLOW_MAX_STEPS},
    },
    "additionalProperties": False,
}


def _project_dir(hub: _Project) -> str:
    """The app's repository: RETICLE_PROJECT_DIR, else the daemon's working directory."""
    return os.path.abspath(os.environ.get("RETICLE_PROJECT_DIR") or hub.project_dir or os.getcwd())


def _flow_name(name: Any) -> str:
    if not isinstance(name, str) or not _FLOW_NAME.fullmatch(name) or ".." in name:
        raise ToolError("%r is not a flow name: use letters, digits, '-', '_' and '.' (at most 64, no path "
                        "separators, no '..')." % (str(name)[:80],), 'for example "checkout-guest"',
                        code="flow_name_invalid")
    return name


def _flows_dir(root: str) -> str:
    return os.path.join(root, ".reticle", "flows")


def _flow_path(root: str, name: str) -> str:
    """The file of flow `name`, refused when `.reticle`, `.reticle/flows` or the file itself is a
    symbolic link, or the folder is not inside the project: a flow is read and written there only."""
    name = _flow_name(name)
    folder = _flows_dir(root)
    for part in (os.path.dirname(folder), folder, os.path.join(folder, name + ".json")):
        if os.path.islink(part):
            raise ToolError("%s is a symbolic link; Reticle reads and writes flows only in the project's own "
                            ".reticle/flows" % part, "replace the link with a folder (or file) of the project",
                            code="path_refused")
    base = os.path.realpath(folder)
    real_root = os.path.realpath(root)
    path = os.path.join(base, name + ".json")
    if os.path.commonpath([base, real_root]) != real_root or os.path.dirname(os.path.realpath(path)) != base:
        raise ToolError("the flow %r would be written outside %s" % (name, real_root), "choose another name",
                        code="path_refused")
    return path


def _flow_problems(flow: Any) -> List[str]:
    validator = jsonschema.Draft202012Validator(_FLOW_FILE)
    problems = []
    for err in validator.iter_errors(flow):
        problems.append("/%s: %s" % ("/".join(str(p) for p in err.absolute_path), err.message[:200]))
    if not problems:
        for i, step in enumerate(flow["steps"]):
            if ("assert" in step) == ("action" in step):
                problems.append("/steps/%d: a step has either `action` (with a `target`) or `assert`" % i)
            elif "action" in step and not step.get("target") and step["action"] != "press":
                problems.append("/steps/%d: an act needs a `target`" % i)
    return problems[:10]


FLOW_MAX_BYTES = 1 << 20             # a flow file larger than this is refused unread
_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _read_regular(path: str, cap: int, follow: bool = False) -> bytes:
    """The bytes of a project file Reticle reads, opened without blocking: O_NONBLOCK (opening a FIFO
    never waits for a writer), O_NOFOLLOW unless `follow` (a path the user typed may be a link; a file
    found in the project may not), then fstat on the open file, so anything but a regular file (a FIFO,
    a device node, a socket) is refused unread, as is one over `cap` bytes.  ValueError naming what the
    file is; FileNotFoundError when there is none."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | (
        0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("it is a symbolic link; Reticle reads only regular files") from None
        raise ValueError("it cannot be opened: %s" % (exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "not a regular file")
            raise ValueError("it is %s, not a regular file: skipped unread" % kind)
        if info.st_size > cap:
            raise ValueError("the file is %d bytes; at most %d are read" % (info.st_size, cap))
        chunks: List[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        raise ValueError("the file grew past %d bytes while read" % cap)
    return data


def _load_flow_file(path: str, follow: bool = False) -> Any:
    """A flow file's JSON: a regular file (see _read_regular) of at most FLOW_MAX_BYTES, nested at most
    MAX_JSON_DEPTH levels, strict JSON; ValueError otherwise (never a RecursionError, never minutes of
    parsing, never a wait on a FIFO)."""
    data = _read_regular(path, FLOW_MAX_BYTES, follow)
    try:
        return _loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError("the file is not UTF-8 (%s)" % exc) from exc


def _read_flow(root: str, name: str) -> dict:
    path = _flow_path(root, name)
    try:
        flow = _load_flow_file(path)
    except FileNotFoundError:
        have = [f["name"] for f in _list_flows(root)]
        raise ToolError("no flow %r in %s" % (name, _flows_dir(root)),
                        "saved flows: %s" % (", ".join(have) or "none; save one with reticle_flow_save"),
                        code="flow_not_found") from None
    except ValueError as exc:
        raise ToolError("the flow file %s is not readable as JSON: %s" % (path, exc),
                        "fix or delete the file (a flow is a regular .json file)", code="flow_invalid") from exc
    problems = _flow_problems(flow)
    if problems:
        raise ToolError("the flow file %s is not a Reticle flow: %s" % (path, "; ".join(problems)),
                        "fix the file, or save the flow again", code="flow_invalid")
    return flow


def _list_flows(root: str) -> List[dict]:
    folder = _flows_dir(root)
    out: List[dict] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for fname in names:
        if not fname.endswith(".json") or not _FLOW_NAME.fullmatch(fname[:-5]):
            continue
        item: Dict[str, Any] = {"name": fname[:-5]}
        try:
            if os.path.islink(os.path.join(folder, fname)):
                raise ValueError("a symbolic link")
            flow = _load_flow_file(os.path.join(folder, fname))
            item["steps"] = len(flow.get("steps", []))
            item["startUrl"] = flow.get("startUrl")
            item["savedAt"] = flow.get("savedAt")
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            item["problem"] = "not readable as a flow: %s" % _short(str(exc), 160)
        out.append(item)
    return out
