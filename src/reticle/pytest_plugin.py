"""pytest plugin.

`pytest --reticle-flows` collects the project's flows (.reticle/flows/*.json under pytest's rootdir)
as test items, setup flows first, and replays each through `reticle verify`'s own code on a daemon
it starts or reuses, so pytest-xdist (`-n auto`) and pytest's JUnit (`--junitxml`) run flows too.
setup.cfg registers _PytestPlugin as the `pytest11` entry point.  Nothing here imports pytest until
pytest calls a hook, and without --reticle-flows every hook returns at once.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, List, Optional

from .cli import _cli_stop, _resolve_port, _verify_flows, _verify_load
from .control import _port_owner_sentence, _probe_port
from .errors import _FlowFailed
from .flow_files import _flows_dir, _list_flows, _load_flow_file
from .reports import _failing_step
from .util import _StateDir, _dumps, _short


def _pytest_failure(res: dict) -> Optional[str]:
    """None when a verify result passes as a test, else the failure's text: `no` and `unknown`
    with the reason and the failing step's evidence, a setup error, or toothless under teeth."""
    verdict = res.get("verified")
    if verdict == "yes" and not res.get("toothless"):
        return None
    if verdict == "yes":
        return ("toothless for %s: the flow is still yes when that write fails, or, for a lie, when it is "
                "answered as before but never reaches the server (--reticle-teeth)" % ", ".join(res["toothless"]))
    if verdict == "error":
        return "setup error: %s" % res.get("error")
    lines = ["verified: %s: %s" % (verdict, res.get("because"))]
    failing = _failing_step(res)
    if failing is not None and failing.get("evidence"):
        lines.append("evidence: %s" % _short(_dumps(failing["evidence"]), 2000))
    return "\n".join(lines)


def _pytest_replay(root: str, path: str, url: Optional[str], teeth: bool) -> dict:
    """One flow file replayed as `reticle verify FILE` replays it (one device, a daemon started when
    none runs, left running for the next item) -> its result."""
    port = _resolve_port(None)

    async def run() -> dict:
        flows, errors = _verify_load([path], root)
        probe = await _probe_port(port)
        if probe["state"] == "foreign":
            return {"name": os.path.basename(path)[:-5], "verified": "error", "steps": [],
                    "error": _port_owner_sentence(port, probe)}
        if errors:
            return errors[0]
        return (await _verify_flows(port, _StateDir(), flows, url, 1, lambda line: None, teeth))[0]
    return asyncio.run(run())


def _pytest_items(session: Any) -> List[Any]:
    """The flows of pytest's rootdir as items (one file node and one item per flow file)."""
    import pytest  # only here: pytest is running and asked for flows
    root = str(session.config.rootpath)
    config = session.config

    class FlowFile(pytest.File):
        def collect(self) -> Any:
            yield FlowItem.from_parent(self, name=self.path.stem)

    class FlowItem(pytest.Item):
        def runtest(self) -> None:
            res = _pytest_replay(root, str(self.path), config.getoption("reticle_url"),
                                 bool(config.getoption("reticle_teeth")))
            self.user_properties.append(("verified", res.get("verified")))
            failure = _pytest_failure(res)
            if failure is not None:
                raise _FlowFailed(failure)

        def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
            if isinstance(excinfo.value, _FlowFailed):
                return "flow %s: %s" % (self.name, excinfo.value)
            return super().repr_failure(excinfo, style)

        def reportinfo(self) -> Any:
            return self.path, None, "reticle flow %s" % self.name

    files = []
    for item in _list_flows(root):
        path = os.path.join(_flows_dir(root), item["name"] + ".json")
        try:
            setup = bool(_load_flow_file(path).get("setup"))
        except (OSError, ValueError, AttributeError):
            setup = False  # its item fails with the file's problem
        files.append((not setup, item["name"], path))
    out = []
    for _, _, path in sorted(files):
        out.extend(FlowFile.from_parent(session, path=session.config.rootpath / os.path.relpath(path, root)).collect())
    return out


class _PytestPlugin:
    """The hooks pytest calls (the `pytest11` entry point `reticle = reticle:_PytestPlugin`)."""

    @staticmethod
    def pytest_addoption(parser: Any) -> None:
        group = parser.getgroup("reticle", "Reticle flows")
        group.addoption("--reticle-flows", action="store_true", default=False,
                        help="collect .reticle/flows/*.json under the rootdir as tests, replayed as `reticle "
                             "verify` replays them: yes passes, no and unknown fail")
        group.addoption("--reticle-teeth", action="store_true", default=False,
                        help="with --reticle-flows: a yes flow still yes with a write it made failed, or "
                             "answered as before but never sent, fails (reticle verify --teeth)")
        group.addoption("--reticle-url", default=None, metavar="URL",
                        help="with --reticle-flows: where flows start (an origin keeps each flow's path)")

    @staticmethod
    def pytest_collection_modifyitems(session: Any, config: Any, items: List[Any]) -> None:
        if config.getoption("reticle_flows", False):
            items.extend(_pytest_items(session))

    @staticmethod
    def pytest_sessionstart(session: Any) -> None:
        config = session.config
        if config.getoption("reticle_flows", False) and not hasattr(config, "workerinput"):
            # the process that owns the run (not an xdist worker) stops a daemon no one ran before it
            probe = asyncio.run(_probe_port(_resolve_port(None)))
            config._reticle_daemon_was = probe["state"]

    @staticmethod
    def pytest_sessionfinish(session: Any) -> None:
        config = session.config
        if getattr(config, "_reticle_daemon_was", None) == "free":
            port = _resolve_port(None)
            if asyncio.run(_probe_port(port))["state"] == "daemon":
                asyncio.run(_cli_stop(port, _StateDir()))
