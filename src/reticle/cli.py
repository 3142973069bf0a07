"""CLI.

The `reticle` command: serve, mcp, status, stop, demo, drive, verify, report merge and init.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import logging
import os
import re
import sys
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

import tornado.httpserver
import tornado.netutil
import tornado.web

from .app import make_app
from .assets import _demo_html
from .browser import _find_browser
from .calls import _CallContext
from .causes import _write_label, _write_shown
from .constants import DEFAULT_HOST, DEFAULT_PORT, __version__
from .control import _DaemonLink, _daemon_record, _http, _mcp_stdio, _port_owner_sentence, _probe_port, _serve
from .devices import MAX_DEVICES_DEFAULT
from .endpoints import CDP_ENDPOINT_ENV, _parse_endpoints
from .errors import ConfigError, RpcError, ToolError
from .flow_files import _flow_problems, _flows_dir, _list_flows, _load_flow_file, _read_flow, _read_regular
from .flows import _fill_secrets, _secret_refs, _start_url
from .hub import Hub
from .init_command import _cli_init
from .reports import (RESULTS_MAX_BYTES, SHARD_MAX, TEETH_MAX_DEFAULT, _TEETH_AS, _durations_of, _failing_step,
    _html_report, _junit_xml, _merge_error, _merge_shards, _results_problem, _shard_plan, _teeth_cell, _teeth_name,
    _teeth_plan, _verify_exit)
from .util import _StateDir, _dumps, _env_int, _loads, _setup_logging, _short


def _count_arg(text: str) -> int:
    """An argparse type: a whole number, 0 or more (a usage error naming what was given otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number; give 0 or more" % text) from None
    if value < 0:
        raise argparse.ArgumentTypeError("%d is negative; give 0 or more" % value)
    return value


def _shard_arg(text: str) -> Tuple[int, int]:
    """An argparse type: I/N, 1 <= I <= N <= SHARD_MAX (a usage error naming what was given otherwise)."""
    m = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)) <= SHARD_MAX:
        raise argparse.ArgumentTypeError("%r is not a shard: give I/N with 1 <= I <= N <= %d, for example 2/4"
                                         % (text, SHARD_MAX))
    return int(m.group(1)), int(m.group(2))


def _build_parser() -> argparse.ArgumentParser:
    """The `reticle` command line: one subparser per command with its options and help text.
    Parsing only; main() runs the command."""
    parser = argparse.ArgumentParser(
        prog="reticle", description="Reticle: verify an AI agent's change in the real, running web app.")
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def port_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--port", type=int, default=None,
                       help="daemon port (default RETICLE_PORT or %d)" % DEFAULT_PORT)

    p = sub.add_parser("serve", help="run the daemon in the foreground")
    port_arg(p)
    p.add_argument("--host", default=None, help="bind address (default RETICLE_HOST or 127.0.0.1)")
    p.add_argument("--tls", action="store_true", help="serve HTTPS/WSS with a self-signed certificate")
    p.add_argument("--certfile", default=None, help="PEM certificate for --tls")
    p.add_argument("--keyfile", default=None, help="PEM private key for --tls")
    p.add_argument("--watch-db", action="append", default=[], metavar="URL",
                   help="watch the app's store read-only as a witness of what it committed (repeatable; also "
                        "RETICLE_WATCH_DB): sqlite:////abs/path.db, postgresql://user:pass@host:port/db, "
                        "file:///abs/path.json")
    p.add_argument("--cdp-endpoint", action="append", default=[], metavar="URL",
                   help="open devices in a browser already running (repeatable; also RETICLE_CDP_ENDPOINT): "
                        "http://127.0.0.1:9222 (Chrome's --remote-debugging-port) or its ws:// URL")
    p = sub.add_parser("mcp", help="MCP over stdio; starts a daemon on the first tool call")
    port_arg(p)
    p = sub.add_parser("status", help="is a daemon running? (exit 1 when not)")
    port_arg(p)
    p.add_argument("--json", action="store_true", help="print the raw /status JSON")
    p = sub.add_parser("stop", help="stop the daemon on the port and wait until the port is free")
    port_arg(p)
    p = sub.add_parser("token", help="print the pairing token")
    port_arg(p)
    p.add_argument("--rotate", action="store_true", help="replace the token with a new one")
    p = sub.add_parser("demo", help="verify the built-in demo app in a browser Reticle starts")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    p = sub.add_parser("drive", help="open a device on URL and keep it until Ctrl-C")
    p.add_argument("url", metavar="URL", help="the page to open")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    port_arg(p)
    p = sub.add_parser("init", help="add the dev-only script tag and the MCP client configuration here")
    p.add_argument("--dry-run", action="store_true", help="print the changes without writing them")
    p.add_argument("--yes", action="store_true", help="write without asking")
    port_arg(p)
    p = sub.add_parser("verify", help="replay saved flows on devices (CI): exit 0 only when every flow is yes")
    p.add_argument("flows", nargs="*", metavar="FLOWS", help="saved flow names or .json paths (default: all saved)")
    p.add_argument("--url", default=None, help="where flows start (an origin keeps each flow's path)")
    p.add_argument("--jobs", type=int, default=1, help="flows replayed in parallel, one device each (at most 4)")
    p.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML to FILE")
    p.add_argument("--report", default=None, metavar="FILE", help="write a self-contained HTML report to FILE")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.add_argument("--teeth", action="store_true",
                   help="replay each yes flow twice more per write it made: that write answered 500, then answered "
                        "as the server answered it but never sent (the lie): a flow still yes is toothless (exit 4)")
    p.add_argument("--shard", type=_shard_arg, default=None, metavar="I/N",
                   help="run only part I of N of the selected flows (one CI job each; `reticle report merge` joins "
                        "the parts' --json results)")
    p.add_argument("--durations", default=None, metavar="FILE",
                   help="with --shard: balance the parts by the flows' times in FILE, a previous run's --json output")
    p.add_argument("--watch-db", action="append", default=[], metavar="URL",
                   help="watch the app's store while the flows replay (repeatable; as serve --watch-db; a "
                        "PostgreSQL server off this machine only through RETICLE_WATCH_DB)")
    p.add_argument("--cdp-endpoint", action="append", default=[], metavar="URL",
                   help="replay on browsers already running (repeatable, one per browser container: --jobs "
                        "spreads the devices over them); as serve --cdp-endpoint")
    p.add_argument("--teeth-max", type=_count_arg, default=None, metavar="N",
                   help="--teeth tests at most N writes of a flow (default %d; two replays each, the 500 and the "
                        "lie): the writes its checks look at first, then in the order made; the rest are named as "
                        "untested" % TEETH_MAX_DEFAULT)
    port_arg(p)
    p = sub.add_parser("report", help="reports of `reticle verify` runs: `report merge` joins shards' results")
    report = p.add_subparsers(dest="report_command", metavar="ACTION")
    p = report.add_parser("merge", help="merge the --json results of `verify --shard` jobs into one run's reports "
                                        "and exit code")
    p.add_argument("paths", nargs="+", metavar="PATH", help="shard results files, or folders of them (*.json)")
    p.add_argument("--junit", default=None, metavar="FILE", help="write the merged JUnit XML to FILE")
    p.add_argument("--report", default=None, metavar="FILE", help="write the merged HTML report to FILE")
    p.add_argument("--json", action="store_true", help="print the merged results as JSON instead of a table")
    return parser


def _token_elsewhere(port: Optional[int], state: _StateDir) -> str:
    """`reticle token --port N`: "" when this state directory's token is the one the daemon on N takes
    (it runs from here, or none runs there yet: one started there would); else why not."""
    if port is None:
        return ""
    probe = asyncio.run(_probe_port(port))
    if probe["state"] == "daemon" and _daemon_record(state, port) is None:
        return ("the Reticle daemon on port %d keeps its state in another directory than %s, so its token is not "
                "this one: run `reticle token` with the RETICLE_STATE_DIR it was started with" % (port, state.path))
    if probe["state"] == "foreign":
        return "port %d is held by something that is not a Reticle daemon: %s" % (port, _port_owner_sentence(
            port, probe))
    return ""


def _resolve_port(value: Optional[int]) -> int:
    port = value if value is not None else _env_int("RETICLE_PORT", DEFAULT_PORT)
    if not 0 <= port <= 65535:
        raise ConfigError("port %d is out of range; use 1-65535" % port)
    return port


def _print_status(data: dict) -> None:
    uptime = data.get("uptimeMs", 0) // 1000
    lines = ["reticle %s running: pid %s, port %s, up %dm%02ds" % (
        data.get("version"), data.get("pid"), data.get("port"), uptime // 60, uptime % 60),
        "MCP clients: %s   devices: %d" % (data.get("mcpClients", 0), len(data.get("devices", [])))]
    for ep in data.get("cdpEndpoints") or []:  # browsers the user runs, where devices open
        lines.append("devices open in the browser at %s (%s): %d now%s" % (ep.get("endpoint"), ep.get("by"),
                     ep.get("devices", 0), ", %s" % ep["browser"] if ep.get("browser") else ""))
    sessions = data.get("sessions") or []
    lines.append("browser sessions: %d" % len(sessions))
    for s in sessions:
        health = ("  (not answering: %s)" % s["notAnswering"] if s.get("notAnswering") else
                  "  (throttled)" if s.get("throttled") else "")
        device = s.get("device") or {}
        whose = ("" if not device else "  (the user's own tab, attached)" if device.get("attached")
                 else "  (a device in the browser at %s)" % device["endpoint"] if device.get("endpoint")
                 else "  (a device Reticle started)")
        lines.append("  %s  %s%s%s" % (s.get("sessionId"), s.get("url"), health, whose))
    if data.get("why"):
        lines.append("why none: %s" % data["why"])
    sys.stdout.write("\n".join(lines) + "\n")


async def _cli_status(port: int, as_json: bool) -> int:
    probe = await _probe_port(port)
    if probe["state"] != "daemon":
        reason = ("nothing listens on port %d" % port if probe["state"] == "free"
                  else _port_owner_sentence(port, probe))
        if as_json:
            sys.stdout.write(_dumps({"running": False, "port": port, "presence": probe["state"],
                                     "reason": reason}) + "\n")
        sys.stderr.write("reticle: no daemon answers: %s. Start one with `reticle serve --port %d` (or let "
                         "`reticle mcp` start it).\n" % (reason, port))
        return 1
    probe.pop("state", None)
    probe.pop("scheme", None)
    if as_json:
        sys.stdout.write(_dumps(probe) + "\n")
    else:
        _print_status(probe)
    return 0


async def _cli_stop(port: int, state: _StateDir) -> int:
    probe = await _probe_port(port)
    if probe["state"] == "free":
        sys.stderr.write("reticle: no daemon runs on port %d; nothing to stop.\n" % port)
        return 0
    if probe["state"] != "daemon":
        sys.stderr.write("reticle: %s\n" % _port_owner_sentence(port, probe))
        return 1
    resp = await _http("POST", port, "/stop", b"{}", {"Authorization": "Bearer %s" % state.token(),
                                                       "Content-Type": "application/json"},
                       scheme=probe.get("scheme", "http"))
    if resp.code != 202:
        sys.stderr.write("reticle: the daemon refused to stop (HTTP %d: %s). Is RETICLE_TOKEN or "
                         "RETICLE_STATE_DIR different from the daemon's?\n" % (
                             resp.code, (resp.body or b"").decode("utf-8", "replace")[:200]))
        return 1
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (await _probe_port(port, timeout=0.3))["state"] == "free":
            sys.stderr.write("reticle: stopped the daemon on port %d (pid %s).\n" % (port, probe.get("pid")))
            return 0
        await asyncio.sleep(0.1)
    sys.stderr.write("reticle: the daemon on port %d (pid %s) did not stop within 10 s.\n" % (port, probe.get("pid")))
    return 1


class _DemoPageHandler(tornado.web.RequestHandler):
    """GET / of the demo app: the embedded page (no script tag)."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write(_demo_html())


class _DemoApiHandler(tornado.web.RequestHandler):
    """POST /api/<what> of the demo app; the profile write fails on purpose."""

    def initialize(self, counter: List[int]) -> None:
        self.counter = counter

    def post(self, what: str) -> None:
        self.counter[0] += 1
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            body = {}
        if what == "profile":
            self.set_status(500)
            self.write({"error": "the profile store is read-only"})
        elif what == "notes":
            self.set_status(201)
            self.write({"id": self.counter[0], "text": str(body.get("text", ""))[:200]})
        elif what == "cart":
            self.counter[1] += 1
            self.set_status(201)
            self.write({"items": self.counter[1]})
        else:
            self.set_status(404)
            self.write({"error": "no such endpoint"})


# step, the predicate in words, the tool call, what the demo expects (the bugs are planted: "no"
# is the right answer for three of them)
_DEMO_STEPS = (
    ("add a note", "POST /api/notes 201, and 'Buy milk' shown", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Add note"}, "action": "click",
      "until": {"kind": "allOf", "predicates": [
          {"kind": "net", "method": "POST", "urlContains": "/api/notes", "status": 201},
          {"kind": "text", "contains": "Buy milk"}]}}, "yes"),
    ("save the profile", "text 'Profile saved' shown", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Save profile"}, "action": "click",
      "until": {"kind": "text", "contains": "Profile saved"}}, "no"),
    ("add one item to the cart", "exactly one POST /api/cart", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Add to cart"}, "action": "click",
      "until": {"kind": "net", "method": "POST", "urlContains": "/api/cart", "count": 1}}, "no"),
    ("load the stats", "no console error", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Load stats"}, "action": "click",
      "until": {"kind": "console", "level": "error", "absent": True}, "timeout_ms": 1500}, "no"),
)


async def _demo_call(hub: Hub, ctx: _CallContext, name: str, args: dict) -> Tuple[dict, bool]:
    """One tools/call through the same dispatcher an MCP client reaches."""
    reply = await hub.dispatcher.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": name, "arguments": args}}, ctx)
    if reply is None or "error" in reply:
        raise ToolError("%s: %s" % (name, (reply or {}).get("error")), code="tool_failed")
    result = reply["result"]
    return result.get("structuredContent") or {}, bool(result.get("isError"))


def _table(rows: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


async def _cli_demo(headed: bool) -> int:
    """`reticle demo`: the demo app in a device, verified through the tools, as a table."""
    out = sys.stdout
    hub = Hub(host=DEFAULT_HOST, port=0)
    sockets = tornado.netutil.bind_sockets(0, DEFAULT_HOST)
    hub.port = sockets[0].getsockname()[1]
    server = tornado.httpserver.HTTPServer(make_app(hub))
    server.add_sockets(sockets)
    app_sockets = tornado.netutil.bind_sockets(0, DEFAULT_HOST)
    demo = tornado.web.Application([(r"/", _DemoPageHandler), (r"/api/(\w+)", _DemoApiHandler, {"counter": [0, 0]})],
                                   log_function=lambda handler: None)
    app_server = tornado.httpserver.HTTPServer(demo)
    app_server.add_sockets(app_sockets)
    url = "http://127.0.0.1:%d/" % app_sockets[0].getsockname()[1]
    ctx = _CallContext("cli", "cli:demo")
    code = 1
    try:
        await asyncio.get_running_loop().run_in_executor(None, hub.devices.reap_orphans)
        out.write("reticle demo: the demo app (planted bugs) is at %s\n" % url)
        exe = _find_browser()
        out.write("reticle demo: starting %s %s ...\n" % (exe, "headed" if headed else "headless"))
        out.flush()
        started = time.monotonic()
        opened, failed = await _demo_call(hub, ctx, "reticle_open", {"url": url, "headed": headed})
        if failed:
            raise ToolError(opened.get("error", "the device did not open"), code=opened.get("code", "browser_failed"))
        out.write("reticle demo: browser up and the page connected in %.2f s (session %s, no script tag: "
                  "the SDK was injected)\n" % (time.monotonic() - started, opened["sessionId"]))
        out.write("reticle demo: running %d verified steps through the same tools an agent calls ...\n\n"
                  % len(_DEMO_STEPS))
        out.flush()
        await _demo_call(hub, ctx, "reticle_act", {"target": {"placeholder": "Write a note"}, "action": "fill",
                                                   "args": {"value": "Buy milk"}})
        rows = [["step", "predicate", "verdict", "time", "evidence"]]
        seen = set()
        surprises = []
        for step, described, tool, args, expected in _DEMO_STEPS:
            t0 = time.monotonic()
            res, failed = await _demo_call(hub, ctx, tool, args)
            ms = (time.monotonic() - t0) * 1000
            verdict = "error" if failed else str(res.get("verified"))
            seen.add(verdict)
            if verdict != expected:
                surprises.append("%s: expected %s, got %s" % (step, expected, verdict))
            because = res.get("error") if failed else res.get("because", "")
            rows.append([step, described, verdict, "%d ms" % ms, _short(because, 90)])
        shot, failed = await _demo_call(hub, ctx, "reticle_screenshot", {})
        out.write(_table(rows) + "\n\n")
        if failed:
            out.write("screenshot: failed (%s)\n" % shot.get("error"))
        else:
            out.write("screenshot: %s (%dx%d)\n" % (shot["path"], shot["width"], shot["height"]))
        out.write("The three 'no' verdicts are the planted bugs: a write that failed under a 'saved' message, a "
                  "double submit and a console error. Only 'yes' is a pass.\n")
        if surprises:
            out.write("reticle demo: unexpected verdicts: %s\n" % "; ".join(surprises))
        else:
            code = 0
    except ToolError as exc:
        out.write("reticle demo: %s\n" % exc.error)
    finally:
        await hub.devices.close_all("the demo ended")
        server.stop()
        app_server.stop()
    out.flush()
    return code


async def _cli_drive(url: str, headed: bool, host: str, port: int) -> int:
    """`reticle drive URL`: a daemon in the foreground with one device on URL until Ctrl-C."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        sys.stderr.write("reticle: drive opens http: and https: URLs only, not %r\n" % url)
        return 2
    failed: List[str] = []

    async def open_device(hub: Hub) -> None:
        try:
            device, _ = await hub.devices.open("cli:drive", url, headed)
        except ToolError as exc:
            failed.append(exc.error)
            sys.stderr.write("reticle: %s\n" % exc.error)
            hub.request_stop("the device did not open")
            return
        sys.stdout.write("session %s on %s\nMCP: %s/mcp  (Ctrl-C closes the browser and stops)\n"
                         % (device.session_id, device.url, hub.public_origin()))
        sys.stdout.flush()

    def ready(hub: Hub) -> None:
        hub.spawn(open_device(hub))

    code = await _serve(host, port, ready=ready)
    return 1 if failed else code


def _verify_load(names: List[str], root: str) -> Tuple[List[dict], List[dict]]:
    """FLOWS arguments (saved names or paths to .json files; none = every saved flow) ->
    (flows, setup errors as results)."""
    flows: List[dict] = []
    errors: List[dict] = []
    if not names:
        names = [f["name"] for f in _list_flows(root)]
        if not names:
            errors.append({"name": "(none)", "verified": "error", "steps": [], "ms": 0,
                           "error": "no saved flows in %s; save one with reticle_flow_save" % _flows_dir(root)})
    expanded: List[str] = []
    for item in names:
        if os.path.isdir(item):  # a folder of flows: every .json file in it, in name order
            found = sorted(os.path.join(item, f) for f in os.listdir(item) if f.endswith(".json"))
            if not found:
                errors.append({"name": item, "verified": "error", "steps": [], "ms": 0,
                               "error": "the folder %s holds no .json flow files" % item})
            expanded.extend(found)
        else:
            expanded.append(item)
    for item in expanded:
        try:
            if item.endswith(".json") or os.sep in item:
                flow = _load_flow_file(item, follow=True)  # a path given on the command line may be a link
                problems = _flow_problems(flow)
                if problems:
                    raise ToolError("%s is not a Reticle flow: %s" % (item, "; ".join(problems)), code="flow_invalid")
            else:
                flow = _read_flow(root, item)
            flows.append(flow)
        except (ToolError, OSError, ValueError) as exc:
            errors.append({"name": os.path.basename(item)[:-5] if item.endswith(".json") else item,
                           "verified": "error", "steps": [], "ms": 0,
                           "error": exc.error if isinstance(exc, ToolError) else str(exc)})
    return flows, errors


def _verify_setups(flows: List[dict], root: str) -> Tuple[List[dict], List[dict]]:
    """The selected flows with the setup flows they start from (`auth`) that are not among them,
    loaded from the project (-> (flows, setup errors as results)).  Each runs once in the run."""
    listed = {f.get("name") for f in flows}
    extra: List[dict] = []
    errors: List[dict] = []
    for name in sorted({f["auth"] for f in flows if f.get("auth")} - listed):
        try:
            extra.append(_read_flow(root, name))
        except ToolError as exc:
            errors.append({"name": name, "verified": "error", "steps": [], "ms": 0,
                           "error": "the setup flow of auth state %s: %s" % (name, exc.error)})
    return extra + flows, errors


def _verify_setup_waits(flows: List[dict]) -> Tuple[Dict[str, dict], Dict[str, "asyncio.Future[str]"]]:
    """The setup flows among `flows` by name, and a future per setup flow another flow starts from:
    set to its verdict when this run's one replay of it is over."""
    setups = {f["name"]: f for f in flows if f.get("setup")}
    loop = asyncio.get_running_loop()
    return setups, {n: loop.create_future() for n in setups if any(f.get("auth") == n for f in flows)}


async def _verify_args(flow: dict, setups: Dict[str, dict], made: Dict[str, "asyncio.Future[str]"]) -> dict:
    """reticle_flow_replay's `flow`, `secrets` and `setupFlow` for a flow: the secrets it types (and,
    for one that starts from auth state NAME, its setup flow NAME types too, after this run's one
    replay of it: a setup error when that was not yes), read from this process's environment,
    RETICLE_SECRET_* only."""
    steps = list(flow["steps"])
    name = flow.get("auth")
    if name and not flow.get("setup") and name in made:
        outcome = await asyncio.shield(made[name])
        if outcome != "yes":
            raise ToolError("auth state %s: its setup flow %s is %s in this run" % (name, name, outcome),
                            code="auth_failed")
        steps += setups[name]["steps"]
    names = sorted({n for s in steps for n in _secret_refs(s.get("args") or {})})
    args: Dict[str, Any] = {"flow": flow}
    if names:
        args["secrets"] = {n: _fill_secrets("${%s}" % n, {}) for n in names}
    if name in setups and not flow.get("setup"):
        args["setupFlow"] = setups[name]
    return args


async def _verify_call(link: "_DaemonLink", name: str, args: dict, timeout: float = 300.0) -> dict:
    """One tools/call through the daemon; a tool error raises ToolError with its message."""
    result = await asyncio.wait_for(link.request("tools/call", {"name": name, "arguments": args}), timeout)
    data = (result or {}).get("structuredContent") or {}
    if (result or {}).get("isError"):
        raise ToolError(str(data.get("error") or data), str(data.get("recovery") or ""),
                        code=str(data.get("code") or "tool_failed"))  # the tool's own code, passed on
    return data


async def _verify_teeth(link: "_DaemonLink", args: dict, writes: List[dict],
                        progress: Callable[[str], None], name: str) -> List[dict]:
    """`--teeth`: replay a flow that was `yes` twice more per write its steps made: with that write
    answered 500 by a fault, then with it answered as the server answered it in the plain run (status,
    the headers a page reads, body) without reaching the server, the lie.  A flow still `yes` under a
    failed write, or under the lie (it never checks that the write was kept: a `server` check or
    reading the data back does), is toothless for that write.  A write whose answer the plain run could
    not capture gets a skipped lie row saying so."""
    out = []
    for w in writes:
        label = _write_label(w)
        match = {"urlContains": w["path"], "method": w["method"]}
        plans = [("failed", {"status": 500, "body": "reticle verify --teeth: this write failed on purpose"}),
                 ("lie", w.get("answer"))]
        if w.get("failure"):  # a framework that answers its failures under 200 (_WIRE_FORMATS' `fail`)
            plans.append(("envelope", w["failure"]))
        for kind, respond in plans:
            if respond is None:
                out.append({"write": label, "as": kind, "verified": "skipped", "toothless": False, "ms": 0,
                            "note": "not replayed as a lie: the plain run has no answer to repeat (a form post's "
                                    "answer is the page that arrived; a body not captured or cut at capture)"})
                progress("%s: teeth for %s: the lie is not replayed (no captured answer)" % (name, label))
                continue
            out.append(await _teeth_replay(link, args, label, kind, {"match": match, "respond": respond}))
            row = out[-1]
            progress("%s: teeth for %s %s: %s" % (name, label, _TEETH_AS[kind][0], "TOOTHLESS (still yes)"
                                                  if row["toothless"] else row["verified"]))
    return out


async def _teeth_replay(link: "_DaemonLink", args: dict, label: str, kind: str, fault: dict) -> dict:
    """One teeth replay of a flow under `fault`: its row (still `yes` with the fault hit: toothless)."""
    t0 = time.monotonic()
    try:
        res = await _verify_call(link, "reticle_flow_replay", dict(args, faults=[fault]))
    except (ToolError, RpcError, asyncio.TimeoutError) as exc:
        reason = exc.error if isinstance(exc, ToolError) else str(exc)
        res = {"verified": "error", "because": reason}
    hits = sum(f.get("hits", 0) for f in res.get("faults", []))
    row = {"write": label, "as": kind, "verified": res.get("verified"),
           "toothless": res.get("verified") == "yes" and hits > 0,
           "ms": round((time.monotonic() - t0) * 1000), "because": res.get("because")}
    if not hits and res.get("verified") != "error":
        row["note"] = "the write was not made again under the fault, so this replay says nothing about it"
    if isinstance(res.get("failedStep"), int):
        row["failedStep"] = res["failedStep"]
    return row


async def _verify_teeth_of(link: "_DaemonLink", args: dict, flow: dict, res: dict, limit: int,
                           progress: Callable[[str], None]) -> None:
    """`--teeth` for one flow that replayed yes: at most `limit` teeth replays (_teeth_plan), the
    results in res["teeth"] and res["toothless"], the writes over the bound in res["teethUntested"]."""
    chosen, untested = _teeth_plan(flow, res.get("writes") or [], limit)
    res["teeth"] = await _verify_teeth(link, args, chosen, progress, res["name"])
    res["toothless"] = [_teeth_name(t) for t in res["teeth"] if t["toothless"]]
    res["writes"] = [_write_shown(w) for w in res.get("writes") or []]
    res["teethMax"] = limit
    if untested:
        res["teethUntested"] = [_write_label(w) for w in untested]
        progress("%s: %d write(s) left untested (over --teeth-max %d): %s" % (
            res["name"], len(untested), limit, ", ".join(res["teethUntested"])))


async def _verify_flows(port: int, state: _StateDir, flows: List[dict], url: Optional[str], jobs: int,
                        progress: Callable[[str], None], teeth: Optional[int] = None) -> List[dict]:
    """Replay `flows` on up to `jobs` devices (one MCP session and one device per job, reused
    from flow to flow, each flow in a fresh browser context) and answer one result per flow,
    in the order given; `teeth` is --teeth's bound (None: no teeth check)."""
    results: List[Optional[dict]] = [None] * len(flows)
    queue = sorted(enumerate(flows), key=lambda item: (not item[1].get("setup"), item[0]))  # setup flows first
    total = len(flows)
    done = [0]
    setups, made = _verify_setup_waits(flows)

    async def worker(n: int) -> None:
        """One job: replay flows taken off the shared queue on its own MCP link and device (opened on the
        first flow, a fresh context for each next one), with secrets from RETICLE_SECRET_*, the teeth check
        and a screenshot of a failure; every flow gets a result (an error one on failure), and the device
        is closed when the queue is empty, whatever happened."""
        link = _DaemonLink(port, state)
        session_id: Optional[str] = None
        try:
            while queue:
                i, flow = queue.pop(0)
                name = flow.get("name", "flow-%d" % i)
                t0 = time.monotonic()
                progress("[%d/%d] %s: replaying %d step(s)" % (i + 1, total, name, len(flow["steps"])))
                res: Dict[str, Any]
                try:
                    # the secrets come from this process's environment, RETICLE_SECRET_* only; the daemon
                    # types each one only into the origin the flow recorded it on
                    args = await _verify_args(flow, setups, made)
                    start = _start_url(flow, url)
                    if not start:
                        raise ToolError("the flow %s has no startUrl; pass --url" % name, code="flow_invalid")
                    # every flow starts clean: a job's next flow reuses its browser in a new, empty
                    # context, so no flow sees the cookies or storage another one left
                    if session_id is None:
                        session_id = (await _verify_call(link, "reticle_open", {"url": start}))["sessionId"]
                    else:
                        args["fresh"] = True
                    args["sessionId"] = session_id
                    if url:
                        args["url"] = url
                    res = dict(await _verify_call(link, "reticle_flow_replay", args))
                    res["name"] = name
                    if teeth is not None and res.get("verified") == "yes":
                        await _verify_teeth_of(link, dict(args, fresh=True), flow, res, teeth, progress)
                    if res.get("verified") != "yes":
                        try:
                            shot = await _verify_call(link, "reticle_screenshot", {"sessionId": session_id})
                            with open(shot["path"], "rb") as fh:
                                res["screenshot"] = base64.b64encode(fh.read()).decode("ascii")
                        except (ToolError, RpcError, OSError, KeyError) as exc:
                            res["screenshotError"] = str(exc)
                except (ToolError, RpcError, ConfigError, asyncio.TimeoutError) as exc:
                    reason = exc.error if isinstance(exc, ToolError) else (
                        exc.message if isinstance(exc, RpcError) else str(exc) or "timed out")
                    res = {"name": name, "verified": "error", "steps": [], "error": reason}
                res["ms"] = round((time.monotonic() - t0) * 1000)
                results[i] = res
                if name in made and not made[name].done():  # the flows that start from its state go on
                    made[name].set_result(res["verified"])
                done[0] += 1
                progress("[%d/%d done] %s: %s in %.1f s%s" % (
                    done[0], total, name, res["verified"], res["ms"] / 1000.0,
                    "" if res["verified"] == "yes"
                    else " (%s)" % _short(res.get("error") or res.get("because") or "", 160)))
        finally:
            if session_id is not None:
                try:
                    await _verify_call(link, "reticle_close", {"sessionId": session_id}, 15.0)
                except (ToolError, RpcError, asyncio.TimeoutError):
                    pass

    await asyncio.gather(*(worker(n) for n in range(max(1, min(jobs, len(flows))))))
    return [r for r in results if r is not None]


def _verify_table(results: List[dict]) -> str:
    teeth = any("teeth" in r for r in results)
    rows = [["flow", "steps", "verdict", "time", "failing step / evidence"] + (["teeth"] if teeth else [])]
    for r in results:
        failing = _failing_step(r)
        if r["verified"] == "error":
            why = "setup: %s" % r.get("error", "")
        elif failing is not None:
            why = "step %d %s: %s" % (failing["index"], failing["step"], failing.get("because") or "")
        else:
            why = ""
        rows.append([r["name"], str(len(r.get("steps", []))), r["verified"], "%.1f s" % (r.get("ms", 0) / 1000.0),
                     _short(why.replace("\n", " "), 160)] + ([_short(_teeth_cell(r), 160)] if teeth else []))
    untested = ["%s: %d write(s) left untested by --teeth (over --teeth-max %s): %s" % (
        r["name"], len(r["teethUntested"]), r.get("teethMax", "?"), ", ".join(r["teethUntested"]))
        for r in results if r.get("teethUntested")]
    return "\n".join([_table(rows)] + untested)


async def _cli_verify(args: argparse.Namespace, port: int, state: _StateDir) -> int:
    """`reticle verify`: replay saved flows on devices, print one table, write the reports."""
    t0 = time.monotonic()
    root = os.path.abspath(os.environ.get("RETICLE_PROJECT_DIR") or os.getcwd())
    jobs = max(1, min(args.jobs, _env_int("RETICLE_MAX_DEVICES", MAX_DEVICES_DEFAULT)))

    def progress(line: str) -> None:
        sys.stderr.write("reticle verify: %s\n" % line)
        sys.stderr.flush()

    flows, results = _verify_load(list(args.flows), root)
    shard: Optional[dict] = None
    if args.shard:
        try:
            flows, results, shard = _verify_shard(args.shard, args.durations, flows, results, progress)
        except ValueError as exc:
            sys.stderr.write("reticle verify: --durations %s: %s\n" % (args.durations, exc))
            return 3
    chosen = {x.get("name") for x in flows + results}
    flows, missing = _verify_setups(flows, root)
    results += missing
    started_here = False
    if flows:
        probe = await _probe_port(port)
        if probe["state"] == "foreign":
            results.append({"name": "(daemon)", "verified": "error", "steps": [], "ms": 0,
                            "error": _port_owner_sentence(port, probe)})
            flows = []
        started_here = probe["state"] == "free"
        mismatch = _verify_endpoints(args.cdp_endpoint, probe, port)
        if mismatch:
            results.append({"name": "(daemon)", "verified": "error", "steps": [], "ms": 0, "error": mismatch})
            flows, started_here = [], False
        if started_here:
            progress("no daemon on port %d: starting one%s" % (port, " (devices on %s)" % ", ".join(
                ep.shown for ep in _parse_endpoints(args.cdp_endpoint, "")) if args.cdp_endpoint else ""))
    if flows and args.watch_db:
        failed = await _verify_watch(port, state, args.watch_db, progress)
        if failed:
            results.append({"name": "(store)", "verified": "error", "steps": [], "ms": 0, "error": failed})
            flows = []
    if flows:
        progress("%d flow(s), %d job(s), project %s" % (len(flows), min(jobs, len(flows)), root))
        results = await _verify_flows(port, state, flows, args.url, jobs, progress,
                                      (TEETH_MAX_DEFAULT if args.teeth_max is None else args.teeth_max)
                                      if args.teeth else None) + results
    for r in results:  # a setup flow run only for the flows that start from it: the merge keeps its own run
        if r.get("name") not in chosen:
            r["setupOnly"] = True
    if started_here:
        await _cli_stop(port, state)
    # a shard that drew no flow (fewer flows than shards) has nothing to fail: the merge judges the run
    code = 0 if shard is not None and not results else _verify_exit(results)
    return _verify_output(args, results, code, t0, progress, shard)


def _verify_endpoints(given: List[str], probe: dict, port: int) -> str:
    """`verify --cdp-endpoint`: the daemon this run starts opens its devices on those browsers (they reach it
    through RETICLE_CDP_ENDPOINT); one already running must have been given the same -> why not, or ""."""
    if not given:
        return ""
    wanted = _parse_endpoints(given, "")  # a URL that is not an endpoint stops the run here (ConfigError)
    if probe["state"] == "free":
        os.environ[CDP_ENDPOINT_ENV] = " ".join(ep.raw for ep in wanted)
        return ""
    have = sorted(e.get("endpoint", "") for e in probe.get("cdpEndpoints") or [] if isinstance(e, dict))
    if have != sorted(ep.shown for ep in wanted):
        return ("a daemon already runs on port %d with devices on %s, not on %s: stop it (reticle stop --port %d) "
                "or give this run another --port" % (port, ", ".join(have) or "browsers it starts itself",
                                                     ", ".join(ep.shown for ep in wanted), port))
    return ""


async def _verify_watch(port: int, state: _StateDir, urls: List[str], progress: Callable[[str], None]) -> str:
    """`verify --watch-db URL`: the daemon watches each store (reticle_watch_db) before the flows replay, so
    their verdicts read what the app stored; -> why one cannot be watched, or ""."""
    link = _DaemonLink(port, state)
    for url in urls:
        try:
            got = await _verify_call(link, "reticle_watch_db", {"url": url}, 60.0)
        except ToolError as exc:
            return "--watch-db: %s; %s" % (exc.error, exc.recovery)
        progress("watching %s: %s" % (got["watching"]["store"], got["watching"]["how"]))
    return ""


def _verify_usage(args: argparse.Namespace) -> Optional[str]:
    """A flag of `reticle verify` given without the one it goes with, or None."""
    if args.durations and not args.shard:
        return "--durations balances shards; give it with --shard I/N"
    if args.teeth_max is not None and not args.teeth:
        return "--teeth-max bounds the replays of --teeth; give it with --teeth"
    return None


def _verify_shard(shard: Tuple[int, int], durations_file: Optional[str], flows: List[dict], errors: List[dict],
                  progress: Callable[[str], None]) -> Tuple[List[dict], List[dict], dict]:
    """`--shard I/N`: the flows (and the setup errors of flows that did not load) of part I, split by
    _shard_plan over every selected name; ValueError for a --durations file that is not results."""
    index, total = shard
    durations: Optional[Dict[str, float]] = None
    if durations_file:
        try:
            durations = _durations_of(_loads(_read_regular(durations_file, RESULTS_MAX_BYTES, True).decode("utf-8")))
        except FileNotFoundError:  # the first run of a pipeline has no previous results: split by name
            progress("--durations %s: no such file; the shards are split by name alone" % durations_file)
        except UnicodeDecodeError as exc:
            raise ValueError("the file is not UTF-8 (%s)" % exc) from None
    items = [("flow", f) for f in flows] + [("error", e) for e in errors if e["name"] != "(none)"]
    names = [str(x.get("name", "")) for _, x in items]
    plan = _shard_plan(names, total, durations)
    mine = [item for item, s in zip(items, plan) if s == index - 1]
    progress("shard %d/%d: %d of %d flow(s)%s" % (index, total, len(mine), len(items),
                                                  " balanced by the times in %s" % durations_file if durations else ""))
    info = {"index": index, "total": total, "selected": names, "byDurations": bool(durations)}
    return ([x for k, x in mine if k == "flow"], [x for k, x in mine if k == "error"]
            + [e for e in errors if e["name"] == "(none)"], info)


def _verify_output(args: argparse.Namespace, results: List[dict], code: int, t0: float,
                   progress: Callable[[str], None], shard: Optional[dict] = None) -> int:
    """The reports of a run (or of merged shards): --junit, --report, then --json or the table."""
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as fh:
            fh.write(_junit_xml(results))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            fh.write(_html_report(results))
    if args.json:
        # a shard's results keep the screenshots, so the merged report shows them
        shown = results if shard else [{k: v for k, v in r.items() if k != "screenshot"} for r in results]
        doc: Dict[str, Any] = {"exitCode": code, "ms": round((time.monotonic() - t0) * 1000), "flows": shown}
        if shard:
            doc["shard"] = shard
        problem = _results_problem(json.loads(_dumps(doc))) if os.environ.get("RETICLE_CHECK_OUTPUT") == "1" else None
        if problem:  # the test suite's check that what verify writes is what merge reads (_RESULTS_SCHEMA)
            progress("internal error: these results are off their schema: %s" % problem)
            code = 70
        sys.stdout.write(_dumps(doc) + "\n")
    else:
        sys.stdout.write(_verify_table(results) + "\n")
        counts = collections.Counter(r["verified"] for r in results)
        sys.stdout.write("%s in %.1f s; exit %d\n" % (", ".join("%d %s" % (n, v) for v, n in sorted(counts.items()))
                                                      or "no flows", time.monotonic() - t0, code))
    for path, what in ((args.junit, "JUnit XML"), (args.report, "HTML report")):
        if path:
            progress("%s written to %s" % (what, path))
    return code


def _cli_report_merge(args: argparse.Namespace) -> int:
    """`reticle report merge PATH...`: the shards' --json results as one run: its JUnit, HTML report,
    table or JSON, and its exit code (_verify_exit; a gap or overlap among the shards is exit 3)."""
    t0 = time.monotonic()

    def progress(line: str) -> None:
        sys.stderr.write("reticle report merge: %s\n" % line)
        sys.stderr.flush()

    files: List[str] = []
    docs: List[Tuple[str, Any]] = []
    unread: List[dict] = []
    for path in args.paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".json"))
            if not found:
                unread.append(_merge_error("(merge)", "the folder %s holds no .json results files" % path))
            files.extend(found)
        else:
            files.append(path)
    for path in files:
        try:
            docs.append((path, _loads(_read_regular(path, RESULTS_MAX_BYTES, True).decode("utf-8"))))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            unread.append(_merge_error("(merge)", "%s cannot be read: %s" % (path, exc)))
    results = _merge_shards(docs) + unread
    progress("%d file(s), %d flow(s)" % (len(files), len(results)))
    return _verify_output(args, results, _verify_exit(results), t0, progress)


def main(argv: Optional[List[str]] = None) -> int:
    """The CLI.  Returns the exit code; never calls sys.exit."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --version, --help and usage errors: argparse exits
        return exc.code if isinstance(exc.code, int) else 2
    if not args.command:
        parser.print_usage(sys.stderr)
        sys.stderr.write("reticle: choose a command: serve, mcp, status, stop, token, demo, drive, verify, report or "
                         "init\n")
        return 2
    try:
        state = _StateDir()
        if args.command == "token":
            if os.environ.get("RETICLE_TOKEN", "").strip():
                if args.rotate:
                    sys.stderr.write("reticle: RETICLE_TOKEN is set, so the token comes from the environment; "
                                     "change it there.\n")
                    return 1
                sys.stdout.write(os.environ["RETICLE_TOKEN"].strip() + "\n")
                return 0
            elsewhere = _token_elsewhere(args.port, state)
            if elsewhere:
                sys.stderr.write("reticle: %s\n" % elsewhere)
                return 1
            sys.stdout.write((state.rotate_token() if args.rotate else state.token()) + "\n")
            return 0
        port = _resolve_port(getattr(args, "port", None))
        if args.command == "serve":
            _setup_logging()
            host = args.host or os.environ.get("RETICLE_HOST", "").strip() or DEFAULT_HOST
            return asyncio.run(_serve(host, port, tls=args.tls, certfile=args.certfile, keyfile=args.keyfile,
                                      watch_db=args.watch_db, cdp_endpoints=args.cdp_endpoint))
        if args.command == "mcp":
            _setup_logging(logging.WARNING)
            return asyncio.run(_mcp_stdio(port, state))
        if args.command == "status":
            return asyncio.run(_cli_status(port, args.json))
        if args.command == "stop":
            return asyncio.run(_cli_stop(port, state))
        if args.command == "demo":
            _setup_logging(logging.WARNING)
            return asyncio.run(_cli_demo(args.headed))
        if args.command == "init":
            return _cli_init(args.dry_run, args.yes, port)
        if args.command == "verify":
            usage = _verify_usage(args)
            if usage:  # before the log goes to stderr: a usage error starts nothing
                sys.stderr.write("reticle verify: %s\n" % usage)
                return 2
            _setup_logging(logging.WARNING)
            return asyncio.run(_cli_verify(args, port, state))
        if args.command == "report":
            if args.report_command != "merge":
                sys.stderr.write("reticle: choose an action: reticle report merge PATH...\n")
                return 2
            return _cli_report_merge(args)
        if args.command == "drive":
            _setup_logging(logging.WARNING)
            host = os.environ.get("RETICLE_HOST", "").strip() or DEFAULT_HOST
            return asyncio.run(_cli_drive(args.url, args.headed, host, port))
    except ConfigError as exc:
        sys.stderr.write("reticle: %s\n" % exc)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2
