###############################################################################
# Flows #######################################################################
###############################################################################
# A flow is a journey the agent verified, saved as `.reticle/flows/<name>.json`
# in the app's repository and replayed with no model.  The tools that act or
# judge append to a small per-tab journey log (_Journeys); reticle_flow_save
# turns a slice of it into steps anchored on testid, role+name, label or
# text (never refs), with the predicates that proved it.  Replay re-resolves
# every target and judges every step with the verdict core the tools use.

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


def _project_dir(hub: "Hub") -> str:
    """The app's repository: RETICLE_PROJECT_DIR, else the daemon's working directory."""
    return os.path.abspath(os.environ.get("RETICLE_PROJECT_DIR") or hub.project_dir or os.getcwd())


def _flow_name(name: Any) -> str:
    if not isinstance(name, str) or not _FLOW_NAME.fullmatch(name) or ".." in name:
        raise ToolError("%r is not a flow name: use letters, digits, '-', '_' and '.' (at most 64, no path "
                        "separators, no '..')." % (str(name)[:80],), 'for example "checkout-guest"')
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
                            ".reticle/flows" % part, "replace the link with a folder (or file) of the project")
    base = os.path.realpath(folder)
    real_root = os.path.realpath(root)
    path = os.path.join(base, name + ".json")
    if os.path.commonpath([base, real_root]) != real_root or os.path.dirname(os.path.realpath(path)) != base:
        raise ToolError("the flow %r would be written outside %s" % (name, real_root), "choose another name")
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
                        "saved flows: %s" % (", ".join(have) or "none; save one with reticle_flow_save")) from None
    except ValueError as exc:
        raise ToolError("the flow file %s is not readable as JSON: %s" % (path, exc),
                        "fix or delete the file (a flow is a regular .json file)") from exc
    problems = _flow_problems(flow)
    if problems:
        raise ToolError("the flow file %s is not a Reticle flow: %s" % (path, "; ".join(problems)),
                        "fix the file, or save the flow again")
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
                            setup=True)
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
                        "delete it and replay the setup flow %s" % name, setup=True) from None
    if not isinstance(state, dict) or not isinstance(state.get("cookies"), list):
        raise ToolError("the saved auth state %s is not one Reticle wrote" % path,
                        "delete it and replay the setup flow %s" % name, setup=True)
    return state


def _auth_expired(state: dict, now: Optional[float] = None) -> int:
    """How many of a saved state's cookies have expired (a session cookie never does here)."""
    now = time.time() if now is None else now
    return sum(1 for c in state["cookies"] if isinstance(c, dict) and isinstance(c.get("expires"), (int, float))
               and 0 < c["expires"] < now)


async def _keep_auth(hub: "Hub", session: "_BrowserSession", name: str) -> dict:
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


def _one_origin(journey: List[dict], origin: Optional[str]) -> List[dict]:
    """The journey's steps on one app: all of them when they share an origin; else those on `origin`
    (flow_save's `origin`, or its `startUrl`'s), and with none given a ToolError naming the origins."""
    origins: List[str] = []
    for s in journey:
        o = _origin_of(s.get("url"))
        if o and o not in origins:
            origins.append(o)
    if len(origins) <= 1:
        return journey
    if not origin:
        raise ToolError("the journey spans %d origins (%s), so it is not one app's flow" % (
            len(origins), ", ".join(origins)), "pass `origin` (one of them) to save that app's steps, or `since` "
            "from the first step on one app", origins=origins)
    mine = [s for s in journey if _origin_of(s.get("url")) == origin]
    if not mine:
        raise ToolError("no step of the journey is on %s; its origins are %s" % (origin, ", ".join(origins)),
                        "pass one of them as `origin`", origins=origins)
    return mine


def _steps_from_journey(journey: List[dict]) -> Tuple[List[dict], Optional[str]]:
    """Journey log entries -> flow steps (and the first URL)."""
    steps = []
    for entry in journey:
        step = {k: v for k, v in entry.items() if k not in ("t", "url", "writes", "replayed")}
        steps.append(step)
    return steps, (journey[0].get("url") if journey else None)


_TOOTHED_KINDS = ("frame", "state", "signal", "storage", "server")


def _blind_to_writes(raw: Any) -> bool:
    """Does this check look only at what the page shows (text, elements, a route, quiet), so that it
    holds whether or not a write behind it worked?  A `net` leaf counts as a check of the write
    only when it asks for a status or `ok`."""
    try:
        p = parse_predicate(raw, "until")
    except Exception:
        return False
    for leaf, neg in _leaves(p):
        if neg:
            continue
        if leaf["kind"] in _TOOTHED_KINDS or (leaf["kind"] == "net" and ("status" in leaf or "ok" in leaf)):
            return False
    return True


def _toothless_warnings(journey: List[dict]) -> List[str]:
    """flow_save's warning: every step whose check is presence-only over a write its act made."""
    out = []
    for i, entry in enumerate(journey):
        check = entry.get("until") if "action" in entry else entry.get("assert")
        writes = entry.get("writes") or []
        if check is None or not writes or not _blind_to_writes(check):
            continue
        acts = [e for e in journey[:i] if "action" in e]
        if "assert" in entry and acts and acts[-1].get("until") is not None and not _blind_to_writes(acts[-1]["until"]):
            continue  # the act before it already checked what its write answered
        w = writes[0]
        out.append("step %d (%s) checks only what the page shows (%s) over the write %s %s it caused: a replay "
                   "stays yes if that write fails. Add {\"kind\": \"net\", \"method\": \"%s\", \"urlContains\": "
                   "\"%s\", \"ok\": true} to the check, or run `reticle verify --teeth`."
                   % (i, _step_label(entry), _describe_predicate_safe(check), w["method"], w["path"], w["method"],
                      w["path"]))
    return out


def _server_check_suggestions(journey: List[dict]) -> List[str]:
    """flow_save's suggestion when the app reports server records: for each step whose act made a write
    and whose check asks nothing of the server, the `server` predicate that would prove the write kept."""
    out = []
    for i, entry in enumerate(journey):
        check = entry.get("until") if "action" in entry else entry.get("assert")
        writes = entry.get("writes") or []
        if not writes or (check is not None and any(leaf["kind"] == "server" for leaf, _ in _leaves(check))):
            continue
        for w in writes[:3]:
            out.append("step %d (%s) made the write %s %s and the app reports what its server did: add "
                       "{\"kind\": \"server\", \"method\": \"%s\", \"urlContains\": \"%s\", \"writes\": "
                       "{\"min\": 1}} to its check, so that a replay proves the server kept the write"
                       % (i, _step_label(entry), w["method"], w["path"], w["method"], w["path"]))
    return out


def _secret_refs(value: Any) -> List[str]:
    """The ${NAME} references in a step's args, in order (each once)."""
    out: List[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.extend(m.group(1) for m in _SECRET_REF.finditer(item) if m.group(1) not in out)
    return out


def _fill_secrets(value: Any, given: Optional[Dict[str, str]] = None) -> Any:
    """Replace every ${RETICLE_SECRET_*} in a step's args with its value: from `given` (the
    values the replaying process read from its own environment), else this process's
    environment.  Any other ${NAME} (${HOME}, ${GITHUB_TOKEN}) is a setup error: a flow from
    someone else's repository must not be able to type this machine's environment into a page."""
    if isinstance(value, dict):
        return {k: _fill_secrets(v, given) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_secrets(v, given) for v in value]
    if isinstance(value, str):
        def sub(m: "re.Match[str]") -> str:
            name = m.group(1)
            if not _SECRET_NAME.fullmatch(name):
                raise ToolError("the flow refers to ${%s}; a flow may read only RETICLE_SECRET_* variables "
                                "(RETICLE_SECRET_ and A-Z 0-9 _), never %s" % (name, name),
                                "rename the reference to ${RETICLE_SECRET_...} in the flow file, or type the "
                                "literal text", setup=True, variable=name)
            got = (given or {}).get(name)
            if got is None:
                got = os.environ.get(name)
            if got is None:
                raise ToolError("the flow needs the environment variable %s (a secret it does not store)"
                                % name, "set %s in the environment of the process that replays (the daemon "
                                "for reticle_flow_replay, the shell for reticle verify) and replay" % name,
                                setup=True, variable=name)
            return got
        return _SECRET_REF.sub(sub, value)
    return value


def _secret_origin(step: dict, flow: dict, start: Optional[str]) -> str:
    """The one origin a step's secret may be typed into: the origin the flow recorded it on
    (secretOrigin, else the flow's startUrl); a replay from another origin (`url`) moves the
    flow's start origin to it, and only that one."""
    recorded = _origin_of(step.get("secretOrigin") or flow.get("startUrl"))
    saved_start, replay_start = _origin_of(flow.get("startUrl")), _origin_of(start)
    if replay_start and (not recorded or recorded == saved_start):
        return replay_start
    return recorded


def _check_secret_origin(session: "_BrowserSession", step: dict, names: List[str], allowed: str) -> None:
    """Refuse (a setup error) to type a secret into a page of any origin but `allowed`.  In a
    device the page's URL is the browser's own record (CDP), not what the page says."""
    device = session.device
    here = _origin_of(device.url if device is not None and device.url else session.url)
    if not allowed or here != allowed:
        raise ToolError("the flow would type %s into %s, but types a secret only into the origin it was "
                        "recorded on (%s); nothing was typed" % (", ".join(names), here or "a page with no origin",
                                                                  allowed or "none recorded"),
                        "check the flow's steps and startUrl: a step before this one left the app's origin",
                        setup=True, origin=here, allowed=allowed)


def _remask_journey(hub: "Hub", session_id: str, step: dict, values: Dict[str, str]) -> None:
    """After a replayed act typed secrets, the journey log holds them in plain text: put their
    ${NAME} back, so the next reticle_flow_save stores the reference, never the value."""
    if not values:
        return
    for entry in hub.journeys.since(session_id, -1e18)[-4:]:
        act_args = entry.get("args")
        if not isinstance(act_args, dict):
            continue
        masked = {}
        for key, v in act_args.items():
            for name, secret in values.items():
                if isinstance(v, str) and secret and secret in v:
                    v = v.replace(secret, "${%s}" % name)
                    entry["secret"] = name
            masked[key] = v
        entry["args"] = masked
        if entry.get("secret") and step.get("secretOrigin"):
            entry["secretOrigin"] = step["secretOrigin"]


def _start_url(flow: dict, url: Optional[str]) -> Optional[str]:
    """Where a replay starts: `url` as given; an origin alone (no path) keeps the flow's own
    path and query; without `url`, the flow's startUrl."""
    start = flow.get("startUrl")
    if not url:
        return start
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/") and not parts.query and start:
        saved = urllib.parse.urlsplit(start)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, saved.path or "/", saved.query, ""))
    return url


def _nearest(error: str) -> List[str]:
    """The candidates the page named in a target miss ("nearest: a, b; testids present: ...")."""
    out: List[str] = []
    for part in error.split("; "):
        for prefix in ("nearest: ", "testids present: "):
            if part.startswith(prefix):
                out.extend(x.strip() for x in part[len(prefix):].split(", ") if x.strip())
        if re.match(r"^\w+s present: ", part):
            out.extend(x.strip() for x in part.split(": ", 1)[1].split(", ") if x.strip())
    return out[:8]


async def _await_target(session: "_BrowserSession", target: dict, timeout_ms: float) -> None:
    """Wait (up to timeout_ms) until `target` matches at least one element: the SDK connects
    before the document is parsed, so a step right after a navigation may come too early.
    Whatever the page shows at the end, the act itself decides (and never acts on a miss)."""
    query: Dict[str, Any] = {"count_only": True}
    for key in ("testid", "label", "placeholder", "text", "role"):
        if key in target:
            query["by"], query["value"] = key, target[key]
            break
    if "by" not in query:
        return
    if "name" in target:
        query["name"] = target["name"]
    deadline = session.now() + timeout_ms
    while True:
        try:
            found = await session.command("query", query, timeout=2.0)
        except ToolError:
            found = None
        if isinstance(found, dict) and (found.get("count") or 0) > 0:
            return
        if session.now() >= deadline:
            return
        await session.wait_change(0.05)


async def _replay_step(hub: "Hub", session: "_BrowserSession", step: dict, ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]] = None, allowed: str = "") -> dict:
    """One step -> {verified, verifiedReason, because, ...}; a target that does not resolve is
    `no` with the page's nearest candidates, and nothing is acted on.  A step that types a
    secret does so only on the page origin `allowed` (else a setup error, nothing typed).  An act
    first waits for the causal work of the act before it (_horizon: a client router's fetch of the
    next view and its render, at most HORIZON_CAP_MS) and, when that act started a navigation (a
    link, a form post), for the new document, so it is not made on the page being left.  What it
    journals is marked `replayed` (a replay is not the agent's own journey)."""
    if "assert" in step:
        args = {"predicate": step["assert"], "timeout_ms": max(step.get("timeout_ms", 0), REPLAY_WAIT_MS)}
        if session.id:
            args["sessionId"] = session.id
        return await _assert_verdict(session, args, _predicate_arg(args, True), replayed=True)
    last = session.last_act
    if last is not None and last >= session.marks.floor():  # what the act before started (a route's data)
        await _await_horizon(session, last, session.now() + HORIZON_CAP_MS)
    session.expire_arrival()
    if session.between_documents() and await session.next_document(NAV_WAIT_S):
        session = hub.bridge.get(session.id) or session  # the step before started a navigation: act on its page
    names = _secret_refs(step.get("args") or {})
    args = {"action": step["action"], "args": _fill_secrets(step.get("args") or {}, secrets_in)}
    typed = {n: _fill_secrets("${%s}" % n, secrets_in) for n in names}
    if step.get("target"):
        args["target"] = step["target"]
        await _await_target(session, step["target"], REPLAY_WAIT_MS)
    if names:
        _check_secret_origin(session, step, names, allowed)
    try:
        if "until" in step:
            args["until"] = step["until"]
            args["timeout_ms"] = max(step.get("timeout_ms", 4000), REPLAY_WAIT_MS)
            try:
                return await _act_and_wait_verdict(session, args, _until_arg(args), replayed=True)
            finally:
                _remask_journey(hub, session.id, step, typed)
        try:
            res = await _act_once(session, args, replayed=True)
        finally:
            _remask_journey(hub, session.id, step, typed)
    except _TabGone:
        raise
    except ToolError as exc:
        if exc.code in ("target_missing", "target_ambiguous"):
            return {"verified": "no", "verifiedReason": exc.code, "because": exc.error, "nearest": _nearest(exc.error),
                    "acted": False}
        raise
    dispatched = res.get("dispatched")
    ok = dispatched is not False
    return {"verified": "yes" if ok else "no", "verifiedReason": "acted" if ok else "not_dispatched",
            "because": "the %s was dispatched%s" % (step["action"], " (the page unloaded: a navigation)"
                                                    if dispatched is None else "") if ok else
            "the %s was not dispatched: %s" % (step["action"], _short(_dumps(res.get("result")), 200))}


def _writes_in(window: List[dict], floor: Optional[float] = None, answers: bool = False) -> List[dict]:
    """The writes a window holds (POST, PUT, PATCH, DELETE and form posts) that started after the
    act at `floor`, once each by method and path: what `reticle verify --teeth` fails on purpose,
    one at a time.  (A write the page repeats on its own is not told apart here: failing it too
    only asks more of the flow.)  answers=True: each with the `answer` its first call got, where
    one can be replayed (_replayable_answer), for --teeth's lie."""
    out: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.request" or not _is_write(d) or _is_dev(d):
            continue
        if floor is not None and not _caused_by_act(e, floor, None):
            continue
        parts = urllib.parse.urlsplit(str(d.get("url") or ""))
        item: Dict[str, Any] = {"method": str(d.get("method")).upper(), "path": parts.path or "/"}
        if d.get("initiator") == "document":
            item["form"] = True
        if any(_write_label(w) == _write_label(item) for w in out):
            continue
        answer = _replayable_answer(d) if answers else None
        if answer is not None:
            item["answer"] = answer
            failure = _framework_failure(d, answer)
            if failure is not None:
                item["failure"] = failure
        out.append(item)
    return out


_LIE_HEADERS = ("content-type", "location", "cache-control")


def _replayable_answer(d: dict) -> Optional[dict]:
    """The answer a completed write got, as a fault can give it again without the server (--teeth's
    lie): {status, headers, body}, the headers a page reads (content-type, location, htmx's `hx-*`
    and the app's own `x-*`; never cookies), or None when it cannot be replayed as it was: a form
    post (the page that arrived is the answer), a faulted or failed call, a body not captured or cut."""
    status = d.get("status")
    if d.get("initiator") == "document" or d.get("faulted") or d.get("faultId") or d.get("error") is not None:
        return None
    if not isinstance(status, int) or not 200 <= status <= 599:
        return None
    body = d.get("responseBody")
    if status in _BODYLESS:
        body = ""
    if not isinstance(body, str) or d.get("responseBodyTruncated") or len(body) > 65536:
        return None
    given = d["responseHeaders"] if isinstance(d.get("responseHeaders"), dict) else {}
    headers = {str(k): str(v)[:1024] for k, v in given.items()
               if str(k).lower() in _LIE_HEADERS or str(k).lower().startswith(("hx-", "x-"))}
    if "content-type" not in {k.lower() for k in headers} and d.get("contentType"):
        headers["content-type"] = str(d["contentType"])[:1024]
    return {"status": status, "headers": dict(list(headers.items())[:20]), "body": body}


def _expectation(step: dict, row: dict) -> bool:
    """Did the step turn out as the flow expects?  `yes` by default; with `expect: "no"` the app
    must fail visibly (a `no` verdict), and a target that was not found is never that."""
    if step.get("expect") != "no":
        return row["verified"] == "yes"
    row["expect"] = "no"
    row["met"] = row["verified"] == "no" and row.get("verifiedReason") not in (
        "target_missing", "target_ambiguous", "not_dispatched")
    if not row["met"] and row["verified"] == "yes":
        row["because"] = "the flow expects no (the app must show the failure) but it was yes: %s" % row.get("because")
    return bool(row["met"])


def _step_evidence(res: dict) -> Any:
    """The few fields of a verdict a person needs to see why."""
    out = {}
    for key in ("failureReason", "observed", "expected", "evidence"):
        if res.get(key) not in (None, "", [], {}):
            out[key] = res[key]
    for key in ("nearest", "contradictions"):
        if res.get(key):
            out[key] = res[key]
    text = _dumps(out)
    return out if len(text) <= 2000 else {"summary": _short(text, 2000)}


def _flow_reason(steps_out: List[dict], failed_at: Optional[int]) -> str:
    """A flow verdict's verifiedReason: its failing step's own (or `expectation_not_met` when that step
    was yes where the flow expects no), else `all_steps_met`."""
    if failed_at is None:
        return "all_steps_met"
    failing = steps_out[failed_at]
    if failing.get("verified") == "yes":
        return "expectation_not_met"
    return str(failing.get("verifiedReason") or "step_%s" % failing.get("verified"))


async def _replay(hub: "Hub", session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                  fresh: bool = False, secrets_in: Optional[Dict[str, str]] = None,
                  auth: Optional[dict] = None) -> dict:
    """Replay a flow in `session`: navigate to its start (in a device, in a new, empty browser
    context when `fresh`), then every step in order.  The first step that is not `yes` stops
    the flow; the ones after it are `skipped`."""
    started = hub.clock()
    start = _start_url(flow, url)
    steps_out: List[dict] = []
    answered: List[dict] = []   # the writes the steps made, with their answers
    if fresh:
        device = hub.devices.for_session(session.id)
        if device is None:
            raise ToolError("`fresh` needs a device: tab %s is not one Reticle started, and a person's browser "
                            "keeps its cookies" % session.id, "open the app with reticle_open, or drop fresh",
                            setup=True)
        if not start:
            raise ToolError("`fresh` needs a start: the flow has no startUrl", "pass url", setup=True)
        session.mark_navigation()
        session = await hub.devices.load(device, start, fresh=True, auth=auth)
    elif start:
        nav = await _tool_navigate(hub, session, {"url": start}, ctx)
        if not nav.get("confirmed"):
            raise ToolError("the page at %s did not connect within 5 s" % start,
                            "check the URL, and that the page loads %s/reticle.js (or use a device)"
                            % hub.public_origin(), setup=True)
        session = hub.bridge.get(session.id) or session
    verdict = "yes"
    failed_at = None
    for i, step in enumerate(flow["steps"]):
        label = _step_label(step)
        if failed_at is not None:
            steps_out.append({"index": i, "step": label, "verified": "skipped"})
            continue
        t0 = hub.clock()
        _progress_note("replaying step %d of %d: %s" % (i + 1, len(flow["steps"]), label))
        cursor = session.now()
        res = await _replay_step(hub, session, step, ctx, secrets_in, _secret_origin(step, flow, start))
        session = hub.bridge.get(session.id) or session
        row = {"index": i, "step": label, "verified": res.get("verified", "unknown"),
               "verifiedReason": res.get("verifiedReason"), "because": res.get("because"),
               "ms": round(hub.clock() - t0)}
        if "until" in step or "assert" in step:
            row["predicate"] = step.get("until") or step.get("assert")
        row["timeline"] = await _timeline_from(session, cursor, row["verified"], label)
        made = _writes_in(session.window(cursor), cursor, answers=True)
        if made:
            row["writes"] = [_write_shown(w) for w in made]
            answered.extend(made)
        met = _expectation(step, row)
        if not met or row["verified"] != "yes":
            row["evidence"] = _step_evidence(res)
        if not met:
            failed_at = i
            verdict = "unknown" if row["verified"] == "unknown" else "no"
        steps_out.append(row)
    out = {"name": flow.get("name"), "verified": verdict, "verifiedReason": _flow_reason(steps_out, failed_at),
           "steps": steps_out, "startUrl": start, "sessionId": session.id, "ms": round(hub.clock() - started)}
    writes: List[dict] = []
    for w in answered:   # each with the answer it first got (--teeth's lie)
        if not any(_write_label(x) == _write_label(w) for x in writes):
            writes.append(w)
    if writes:
        out["writes"] = writes
    if failed_at is not None:
        failing = steps_out[failed_at]
        out["failedStep"] = failed_at
        out["because"] = "step %d (%s) is %s%s: %s" % (failed_at, failing["step"], failing["verified"],
                                                       " where the flow expects no" if failing.get("expect") else "",
                                                       failing.get("because"))
    else:
        expected_no = sum(1 for r in steps_out if r.get("expect") == "no")
        out["because"] = "all %d steps are yes" % len(steps_out) if not expected_no else (
            "every step met what the flow expects (%d yes, %d no as expected)" % (len(steps_out) - expected_no,
                                                                               expected_no))
    if not any("until" in s or "assert" in s for s in flow["steps"]):
        out["note"] = "this flow has no predicate: it shows the steps ran, not that they worked"
    return out


async def _replay_flow(hub: "Hub", session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                       fresh: bool = False, secrets_in: Optional[Dict[str, str]] = None,
                       setup_flow: Optional[dict] = None, retry: bool = True) -> dict:
    """_replay with logged-in starts.  A setup flow that ends yes saves its device's state.  A flow
    with `auth` starts, in a fresh context, from its setup flow's saved state; when there is none or
    its cookies expired, the setup flow (`setup_flow`, else the saved one) makes it first.  A flow
    that fails at its first step from a state made before this replay is retried once after its
    setup flow made the state again (a second failure there: _auth_cause), unless not `retry` (a
    replay under faults, whose first step may fail on purpose)."""
    name = flow.get("auth")
    out = await _replay(hub, session, flow, url, ctx, fresh, secrets_in) if not name else \
        await _replay_auth(hub, session, flow, url, ctx, secrets_in, setup_flow, retry)
    if flow.get("setup") and out["verified"] == "yes":
        out["authSaved"] = await _keep_auth(hub, hub.bridge.get(session.id) or session, str(flow.get("name")))
    return out


async def _replay_auth(hub: "Hub", session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]], setup_flow: Optional[dict], retry: bool) -> dict:
    """_replay_flow for a flow that starts from auth state `flow["auth"]`."""
    name = flow["auth"]
    if hub.devices.for_session(session.id) is None:
        raise ToolError("the flow starts from the auth state %s, which needs a device: tab %s is not one Reticle "
                        "started" % (name, session.id), "open the app with reticle_open", setup=True)
    state = _load_auth_state(_project_dir(hub), name)
    remade = None
    if state is None or _auth_expired(state):
        remade = "there was no saved state" if state is None else "its saved cookies expired"
        state = await _remake_auth(hub, session, name, url, ctx, secrets_in, setup_flow, remade)
    session = hub.bridge.get(session.id) or session
    out = await _replay(hub, session, flow, url, ctx, True, secrets_in, auth=state)
    if out["verified"] != "yes" and out.get("failedStep") == 0 and remade is None and retry:
        remade = "the flow failed at its first step from it (%s)" % _short(str(out.get("because")), 300)
        state = await _remake_auth(hub, session, name, url, ctx, secrets_in, setup_flow, remade)
        session = hub.bridge.get(session.id) or session
        out = await _replay(hub, session, flow, url, ctx, True, secrets_in, auth=state)
        if out["verified"] != "yes" and out.get("failedStep") == 0:
            out["because"] = _auth_cause(hub, out, name, setup_flow)
    if remade is not None:
        out["authRemade"] = {"name": name, "why": remade}
    return out


def _auth_cause(hub: "Hub", out: dict, name: str, setup_flow: Optional[dict]) -> str:
    """Why a flow failed at its first step although its auth state was just made again: on the page
    its setup flow starts at (the login page), the state no longer logs in; anywhere else the failure
    is the flow's own, said with what was tried."""
    device = hub.devices.for_session(out.get("sessionId"))
    try:
        setup = setup_flow if setup_flow is not None else _read_flow(_project_dir(hub), name)
    except ToolError:
        setup = {}
    here = urllib.parse.urlsplit(device.url if device is not None else "")
    login = urllib.parse.urlsplit(str(setup.get("startUrl") or ""))
    if login.path and (here.netloc, here.path) == (login.netloc, login.path):
        return ("auth state %s no longer logs in: made again by its setup flow, the flow still starts on the "
                "setup flow's page %s: %s" % (name, login.path, out.get("because")))
    return ("%s (the auth state %s was made again by its setup flow and the flow retried: the failure is the "
            "flow's own)" % (out.get("because"), name))


async def _remake_auth(hub: "Hub", session: "_BrowserSession", name: str, url: Optional[str], ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]], setup_flow: Optional[dict], why: str) -> dict:
    """Replay setup flow `name` in a fresh context and answer the state it saved; a setup error naming
    the state when the setup flow is not yes."""
    setup = setup_flow if setup_flow is not None else _read_flow(_project_dir(hub), name)
    if setup.get("name") != name or not setup.get("setup"):
        raise ToolError("the flow %r is not a setup flow, so it cannot make the auth state %r" % (setup.get("name"),
                        name), 'mark the flow %s with "setup": true (reticle_flow_save {setup: true})' % name,
                        setup=True)
    _progress_note("making the auth state %s with its setup flow (%s)" % (name, why))
    res = await _replay(hub, session, setup, url, ctx, True, secrets_in)
    if res["verified"] != "yes":
        raise ToolError("auth state %s no longer logs in: %s, and its setup flow %s is %s: %s"
                        % (name, why, name, res["verified"], res.get("because")),
                        "replay the setup flow %s and fix what it shows" % name, setup=True)
    kept = await _keep_auth(hub, hub.bridge.get(session.id) or session, name)
    state = _load_auth_state(_project_dir(hub), name) if kept.get("saved") else None
    if state is None:
        raise ToolError("the auth state %s could not be saved: %s" % (name, kept.get("note")),
                        "start flows that use auth in a device (reticle_open)", setup=True)
    return state


# ---- reports of `reticle verify`: pure functions of the results (one dict per flow) ----
# A result: {name, verified: yes|no|unknown|error, ms, steps: [{index, step, verified, verifiedReason,
# because, predicate?, evidence?, ms?}], because, failedStep?, error?, screenshot? (base64 PNG)}.

_TEETH_AS = {"failed": ("answered 500", "the flow is still yes when that write fails"),
             "lie": ("answered as before, never sent (lie)",
                     "the flow is still yes when that write is answered as before but never reaches the server: "
                     "it never checks that the write was kept"),
             "envelope": ("answered with its framework's own failure (envelope)",
                          "the flow is still yes when that write fails the way its framework says so (a SvelteKit "
                          "action's failure envelope under HTTP 200)")}


def _teeth_name(t: dict) -> str:
    """A teeth replay as the reports name it: `POST /api/save`, `POST /api/save (lie)` or `POST /api/save
    (envelope)`."""
    return t["write"] + (" (%s)" % t["as"] if t.get("as") in ("lie", "envelope") else "")


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # not XML 1.0 characters


def _xml(value: Any) -> str:
    return html.escape(_XML_BAD.sub("?", str(value)), quote=True)


def _verify_exit(results: List[dict]) -> int:
    """0 when every flow is yes; 3 for any setup error, else 1 for any no, else 2 for any unknown,
    else 4 when `--teeth` found a flow toothless for a write."""
    verdicts = {r["verified"] for r in results}
    if not results or "error" in verdicts:
        return 3
    if "no" in verdicts:
        return 1
    if "unknown" in verdicts:
        return 2
    if any(r.get("toothless") for r in results):
        return 4
    return 0


def _step_failed(s: dict) -> bool:
    """A step that did not turn out as its flow expects (see _expectation)."""
    if "met" in s:
        return s["met"] is False
    return s.get("verified") in ("no", "unknown")


TEETH_MAX_DEFAULT = 8                # `verify --teeth` tests at most this many writes a flow, 2 replays each


def _write_shown(w: dict) -> dict:
    """A write of _writes_in as results and reports show it: without the answers kept for --teeth."""
    return {k: v for k, v in w.items() if k not in ("answer", "failure")}


def _write_label(w: dict) -> str:
    """How a write is named in every teeth report: `POST /api/save`, `(form post)` for a document's."""
    return "%s %s%s" % (w["method"], w["path"], " (form post)" if w.get("form") else "")


def _checked_writes(flow: dict, writes: List[dict]) -> List[dict]:
    """The writes some check of `flow` looks at: a `net` or `server` leaf (not under a `not`) whose
    method (when it names one) and `urlContains` (when it has one) match the write's."""
    leaves: List[dict] = []
    for step in flow.get("steps", ()):
        for raw in (step.get("until"), step.get("assert")):
            if raw is None:
                continue
            try:
                leaves.extend(leaf for leaf, neg in _leaves(parse_predicate(raw, "until"))
                              if not neg and leaf["kind"] in ("net", "server"))
            except Exception:  # a flow's own check that does not parse fails its replay; here it checks nothing
                continue
    return [w for w in writes if any(
        (not leaf.get("method") or str(leaf["method"]).upper() == w["method"])
        and (not leaf.get("urlContains") or str(leaf["urlContains"]) in w["path"]) for leaf in leaves)]


def _teeth_plan(flow: dict, writes: List[dict], limit: int) -> Tuple[List[dict], List[dict]]:
    """Which writes `--teeth` fails on purpose (at most `limit`, so the page under test does not choose
    how long CI runs) and which it leaves untested.  Deterministic: first the writes the flow's checks
    look at (_checked_writes), then the others, each group in the order the replay first made them."""
    checked = _checked_writes(flow, writes)
    ordered = checked + [w for w in writes if w not in checked]
    return ordered[:max(0, limit)], ordered[max(0, limit):]


def _teeth_cell(r: dict) -> str:
    if "teeth" not in r:
        return "" if r["verified"] == "yes" else "-"
    untested = r.get("teethUntested") or []
    if untested:  # short: the names follow the table (_verify_table), and are in every report
        tested = "TOOTHLESS for %d replay(s)" % len(r["toothless"]) if r.get("toothless") else (
            "teeth for %d write(s)" % len({t["write"] for t in r["teeth"]}) if r["teeth"] else "none tested")
        return "%s; %d UNTESTED (over --teeth-max %s)" % (tested, len(untested), r.get("teethMax", "?"))
    if not r["teeth"]:
        return "no writes"
    if r.get("toothless"):
        return "TOOTHLESS for %s" % ", ".join(r["toothless"])
    return "teeth for %s" % ", ".join(_teeth_name(t) for t in r["teeth"] if t["verified"] != "skipped")


def _lies_skipped(r: dict) -> int:
    return sum(1 for t in r.get("teeth") or () if t["verified"] == "skipped")


def _failing_step(result: dict) -> Optional[dict]:
    i = result.get("failedStep")
    return result["steps"][i] if isinstance(i, int) and i < len(result.get("steps", [])) else None


def _junit_xml(results: List[dict], suite_name: str = "reticle verify") -> str:
    """JUnit XML: one <testsuite> per flow, one <testcase> per step; `no` and `unknown` steps are
    <failure> (type says which), steps after the failing one <skipped>, a setup error an <error>."""
    def count(r: dict, v: str) -> int:
        if v == "failed":
            return sum(1 for s in r.get("steps", []) if _step_failed(s)) + len(r.get("toothless") or ())
        return sum(1 for s in r.get("steps", []) if s.get("verified") == v)
    def cases(r: dict) -> int:
        return max(1, len(r.get("steps", []))) + len(r.get("teeth") or ()) + len(r.get("teethUntested") or ())
    total = sum(cases(r) for r in results)
    fails = sum(count(r, "failed") for r in results)
    errors = sum(1 for r in results if r["verified"] == "error")
    skipped = sum(count(r, "skipped") + len(r.get("teethUntested") or ()) + _lies_skipped(r) for r in results)
    secs = sum(r.get("ms", 0) for r in results) / 1000.0
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">'
           % (_xml(suite_name), total, fails, errors, skipped, secs)]
    for r in results:
        steps = r.get("steps", [])
        classname = "reticle.flows.%s" % r["name"]
        out.append('  <testsuite name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">'
                   % (_xml(r["name"]), cases(r), count(r, "failed"), 1 if r["verified"] == "error" else 0,
                      count(r, "skipped") + len(r.get("teethUntested") or ()) + _lies_skipped(r),
                      r.get("ms", 0) / 1000.0))
        if r.get("shard"):
            out.append('    <properties><property name="shard" value="%s"/></properties>' % _xml(r["shard"]))
        if r["verified"] == "error" and not steps:
            out.append('    <testcase name="setup" classname="%s" time="%.3f">'
                       % (_xml(classname), r.get("ms", 0) / 1000.0))
            out.append('      <error message="%s" type="setup"/>' % _xml(r.get("error", "setup error")))
            out.append('    </testcase>')
        for s in steps:
            out.append('    <testcase name="%s" classname="%s" time="%.3f">' % (
                _xml("step %d: %s" % (s["index"], s["step"])), _xml(classname), s.get("ms", 0) / 1000.0))
            if _step_failed(s):
                out.append('      <failure message="%s" type="%s">%s</failure>' % (
                    _xml(s.get("because") or s["verified"]), _xml(s["verified"]),
                    _xml(_dumps({"verifiedReason": s.get("verifiedReason"), "predicate": s.get("predicate"),
                                 "evidence": s.get("evidence")}))))
            elif s["verified"] == "skipped":
                out.append('      <skipped message="an earlier step of the flow failed"/>')
            out.append('    </testcase>')
        for t in r.get("teeth") or ():
            does, toothless = _TEETH_AS[t.get("as", "failed")]
            out.append('    <testcase name="%s" classname="%s" time="%.3f">' % (
                _xml("teeth: %s %s" % (t["write"], does)), _xml(classname), t.get("ms", 0) / 1000.0))
            if t["toothless"]:
                out.append('      <failure message="%s" type="toothless">%s</failure>' % (
                    _xml("toothless for %s: %s" % (t["write"], toothless)),
                    _xml(_dumps({"write": t["write"], "verified": t["verified"], "because": t.get("because")}))))
            elif t["verified"] == "skipped":
                out.append('      <skipped message="%s"/>' % _xml(t.get("note") or "not replayed"))
            out.append('    </testcase>')
        for w in r.get("teethUntested") or ():
            out.append('    <testcase name="%s" classname="%s" time="0.000">' % (
                _xml("teeth: %s answered 500" % w), _xml(classname)))
            out.append('      <skipped message="%s"/>' % _xml(
                "untested: the flow made more writes than --teeth-max %s" % r.get("teethMax", "")))
            out.append('    </testcase>')
        out.append('  </testsuite>')
    out.append('</testsuites>')
    return "\n".join(out) + "\n"


_REPORT_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}th,td{border:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}code,pre{font:12px/1.4 ui-monospace,monospace;
white-space:pre-wrap;word-break:break-word;margin:0}.yes{color:#0a7a2f;font-weight:600}.no,.error{color:#b00020;
font-weight:600}.unknown{color:#a15c00;font-weight:600}.skipped{color:#888}img{max-width:100%;
border:1px solid #ccc;margin:.5em 0}section{margin-bottom:2em}"""


_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def _html_steps(r: dict) -> _Markup:
    rows = [_html_join([_html_of('<tr class="step"><td>%s</td><td>%s</td><td><code>%s</code></td><td class="%s">'
                     "%s%s</td><td>%s</td><td><pre>%s</pre></td></tr>",
                     s["index"], s["step"], _dumps(s["predicate"]) if s.get("predicate") else "", s["verified"],
                     s["verified"], " (%s)" % s["verifiedReason"] if s.get("verifiedReason") else "",
                     "%d ms" % s["ms"] if "ms" in s else "",
                     ((s.get("because") or "") + ("\n" + json.dumps(s["evidence"], indent=1, ensure_ascii=False)[:4000]
                                                  if s.get("evidence") else "")).strip()),
                         _html_timeline(s)]) for s in r["steps"]]
    return _html_of("<table><tr><th>#</th><th>step</th><th>predicate</th><th>verdict</th><th>time</th>"
                    "<th>evidence</th></tr>%s</table>", _html_join(rows))


def _html_timeline(step: dict) -> _Markup:
    """A step's timeline under its row: inline SVG (_timeline_svg), open when the step did not pass."""
    if not isinstance(step.get("timeline"), dict):
        return _Markup("")
    return _html_of('<tr class="timeline"><td></td><td colspan="5"><details%s><summary>timeline of step %s'
                    "</summary>%s</details></td></tr>", _Markup(" open") if step.get("verified") != "yes" else "",
                    step.get("index"), _Markup(_timeline_svg(step["timeline"])))


def _html_teeth(r: dict) -> _Markup:
    rows = [_html_of('<tr class="teeth"><td><code>%s</code></td><td>%s</td><td class="%s">%s</td>'
                     '<td class="%s">%s</td><td>%s</td></tr>',
                     t["write"], _TEETH_AS[t.get("as", "failed")][0], t["verified"], t["verified"],
                     "no toothless" if t["toothless"] else "yes", "toothless" if t["toothless"] else "teeth",
                     t.get("note") or t.get("because") or "") for t in r.get("teeth") or ()]
    rows += [_html_of('<tr class="untested"><td><code>%s</code></td><td>-</td><td class="skipped">-</td>'
                      '<td class="skipped">untested</td><td>over --teeth-max %s: not replayed with this '
                      "write failed</td></tr>", w, r.get("teethMax", "")) for w in r.get("teethUntested") or ()]
    return _html_of("<table><tr><th>write</th><th>answered</th><th>flow verdict</th><th>teeth</th><th>because</th>"
                    "</tr>%s</table>", _html_join(rows))


def _html_flow(r: dict) -> _Markup:
    """One flow's section of the HTML report."""
    parts = [_html_of('<section id="flow-%s" class="flow"><h2>%s <span class="%s">%s</span></h2>',
                      r["name"], r["name"], r["verified"], r["verified"])]
    if r.get("startUrl"):
        parts.append(_html_of("<p>start: <code>%s</code></p>", r["startUrl"]))
    if r.get("shard"):
        parts.append(_html_of("<p>shard: %s</p>", r["shard"]))
    if r.get("error"):
        parts.append(_html_of('<p class="error">setup error: %s</p>', r["error"]))
    if r.get("steps"):
        parts.append(_html_steps(r))
    if r.get("teeth") or r.get("teethUntested"):
        parts.append(_html_teeth(r))
    shot = r.get("screenshot")
    if isinstance(shot, str) and shot and _BASE64.match(shot):
        failing = _failing_step(r)
        parts.append(_html_of('<figure><img alt="screenshot at step %s" src="data:image/png;base64,%s">'
                              "<figcaption>the page when step %s failed</figcaption></figure>",
                              r.get("failedStep"), shot,
                              "%d (%s)" % (failing["index"], failing["step"]) if failing else "?"))
    elif shot:
        parts.append(_html_of('<p class="error">%s</p>', "the screenshot is left out: it is not base64 data"))
    parts.append(_html_of("</section>"))
    return _html_join(parts)


def _html_report(results: List[dict], title: str = "Reticle verify") -> str:
    """One self-contained page: a summary table, then each flow's steps with predicate, verdict,
    evidence and timing, and the screenshot of a failing step inline (data: URL).  Every field goes
    in through _html_of (escaped); the screenshot only when it is base64."""
    sharded = any("shard" in r for r in results)  # merged shards: each flow's shard (reticle report merge)
    rows = [_html_of('<tr><td><a href="#flow-%s">%s</a></td><td>%s</td><td class="%s">%s</td><td>%s</td>'
                     '<td>%s</td><td class="%s">%s</td>%s</tr>',
                     r["name"], r["name"], len(r.get("steps", [])), r["verified"], r["verified"],
                     "%.2f s" % (r.get("ms", 0) / 1000.0), r.get("error") or r.get("because") or "",
                     "no toothless" if r.get("toothless") else "yes", _teeth_cell(r),
                     _html_of('<td class="shard">%s</td>', r.get("shard", "")) if sharded else "")
            for r in results]
    page = _html_of(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n<title>%s</title><style>%s</style></head>'
        "<body>\n<h1>%s</h1>\n<p>%s flow(s), exit code %s, generated %s by reticle %s.</p>\n"
        "<table><tr><th>flow</th><th>steps</th><th>verdict</th><th>time</th><th>because</th><th>teeth</th>%s</tr>"
        "\n%s\n</table>\n%s\n</body></html>\n",
        title, _Markup(_REPORT_CSS), title, len(results), _verify_exit(results),
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"), __version__,
        _Markup("<th>shard</th>") if sharded else "", _Markup("\n".join(rows)),
        _Markup("\n".join(_html_flow(r) for r in results)))
    return str(page)


# ---- shards of `reticle verify` and their merge: pure functions ----
# `verify --shard I/N` runs one of N disjoint parts of the selected flows (one CI job each);
# `reticle report merge` joins the parts' `--json` results into one run's reports and exit code.

SHARD_MAX = 256                      # the largest N of --shard I/N
RESULTS_MAX_BYTES = 256 << 20        # a results file (`--json` output, screenshots inline) read by merge/--durations
RESULTS_MAX_FLOWS = 100000           # flows (and selected names) one results file may hold

# What `reticle verify --json` writes (a shard's results too), field by field: `report merge` and
# `--durations` read nothing a results file says before this schema passed it, so a field of the wrong
# type or an unknown verdict is a clean error naming the file and the field, never a traceback, a
# false pass or a report built from it.  The free-form parts (a step's predicate and evidence, the
# writes, the faults) are shown escaped and decide nothing.
_TEXT = {"type": "string", "maxLength": 100000}
_MAYBE_TEXT = {"type": ["string", "null"], "maxLength": 100000}
_MS = {"type": "number", "minimum": 0, "maximum": 1e12}
_NAMES_LIST = {"type": "array", "maxItems": RESULTS_MAX_FLOWS, "items": _TEXT}
_RESULTS_SCHEMA: Dict[str, Any] = {
    "$schema": _SCHEMA_DIALECT, "type": "object", "required": ["flows"], "additionalProperties": False,
    "properties": {
        "exitCode": {"type": "integer", "minimum": 0, "maximum": 255},
        "ms": _MS,
        "flows": {"type": "array", "maxItems": RESULTS_MAX_FLOWS, "items": {"$ref": "#/$defs/flow"}},
        "shard": {"type": "object", "required": ["index", "total", "selected"], "additionalProperties": False,
                  "properties": {"index": {"type": "integer", "minimum": 1, "maximum": SHARD_MAX},
                                 "total": {"type": "integer", "minimum": 1, "maximum": SHARD_MAX},
                                 "selected": _NAMES_LIST, "byDurations": {"type": "boolean"}}}},
    "$defs": {
        "flow": {"type": "object", "required": ["name", "verified"], "additionalProperties": False, "properties": {
            "name": {"type": "string", "maxLength": 1000},
            "verified": {"enum": ["yes", "no", "unknown", "error"]},
            "verifiedReason": _MAYBE_TEXT, "because": _MAYBE_TEXT, "error": _TEXT, "note": _TEXT, "ms": _MS,
            "steps": {"type": "array", "maxItems": 10000, "items": {"$ref": "#/$defs/step"}},
            "failedStep": {"type": ["integer", "null"], "minimum": 0},
            "startUrl": _MAYBE_TEXT, "sessionId": _MAYBE_TEXT,
            "screenshot": {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$"},  # base64: a PNG, inline
            "screenshotError": _TEXT,
            "writes": {"type": "array", "items": {"type": "object"}},
            "faults": {"type": "array", "items": {"type": "object"}},
            "authSaved": {"type": "object"}, "authRemade": {"type": "object"},
            "teeth": {"type": "array", "maxItems": 10000, "items": {"$ref": "#/$defs/tooth"}},
            "toothless": _NAMES_LIST, "teethUntested": _NAMES_LIST,
            "teethMax": {"type": "integer", "minimum": 0},
            "setupOnly": {"type": "boolean"},
            "shard": {"type": "string", "pattern": "^[0-9]{1,3}/[0-9]{1,3}$"}}},  # a merged run, merged again
        "step": {"type": "object", "required": ["index", "step", "verified"], "additionalProperties": False,
                 "properties": {
                     "index": {"type": "integer", "minimum": 0}, "step": _TEXT,
                     "verified": {"enum": ["yes", "no", "unknown", "skipped", "error"]},
                     "verifiedReason": _MAYBE_TEXT, "because": _MAYBE_TEXT, "ms": _MS,
                     "predicate": {}, "evidence": {}, "writes": {"type": "array", "items": {"type": "object"}},
                     "expect": {"enum": ["no"]}, "met": {"type": "boolean"},
                     "timeline": {"type": "object", "additionalProperties": False, "properties": {
                         "act": _TEXT, "end": _MS, "verdict": _TEXT, "more": {"type": "integer", "minimum": 0},
                         "rows": {"type": "array", "maxItems": TIMELINE_ROWS, "items": {
                             "type": "object", "additionalProperties": False, "properties": {
                                 "k": {"enum": list(_TIMELINE_COLOURS)}, "s": _MS, "e": {"type": ["number", "null"]},
                                 "t": _TEXT, "at": _TEXT, "fail": {"type": "boolean"}}}}}}}},
        "tooth": {"type": "object", "required": ["write", "verified", "toothless"], "additionalProperties": False,
                  "properties": {
                      "write": _TEXT, "as": {"enum": list(_TEETH_AS)},
                      "verified": {"enum": ["yes", "no", "unknown", "error", "skipped"]},
                      "toothless": {"type": "boolean"}, "ms": _MS, "because": _MAYBE_TEXT, "note": _TEXT,
                      "failedStep": {"type": ["integer", "null"], "minimum": 0}}}}}
_RESULTS_VALIDATOR = jsonschema.Draft202012Validator(_RESULTS_SCHEMA)
_JSON_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"), (list, "an array"),
               (dict, "an object"), (type(None), "null"))


def _results_problem(doc: Any) -> Optional[str]:
    """What makes `doc` no `reticle verify --json` results (_RESULTS_SCHEMA), naming the field
    ("flows[2].steps[0].index is a string; expected integer"), or None.  The message is built from
    the schema and the field's path, never from the field's value, which can be anything."""
    err = jsonschema.exceptions.best_match(_RESULTS_VALIDATOR.iter_errors(doc))
    if err is None:
        return None
    where = "".join("[%d]" % p if isinstance(p, int) else ".%s" % _short(str(p), 40) for p in err.absolute_path)
    where = where.lstrip(".") or "the file"
    got = next(name for kind, name in _JSON_TYPES if isinstance(err.instance, kind))
    rule, want = err.validator, err.validator_value
    if rule == "type":
        return "%s is %s; expected %s" % (where, got, " or ".join(want) if isinstance(want, list) else want)
    if rule == "enum":
        return "%s is %s; expected one of %s" % (where, _short(_dumps(err.instance), 40), ", ".join(map(str, want)))
    if rule == "required":
        missing = [k for k in want if isinstance(err.instance, dict) and k not in err.instance]
        return "%s lacks the field %s" % (where, ", ".join(missing))
    if rule == "additionalProperties":
        known = (err.schema.get("properties") or {}).keys()
        extra = sorted(k for k in err.instance if k not in known) if isinstance(err.instance, dict) else []
        return "%s has the unknown field %s (accepted: %s)" % (where, _short(", ".join(extra), 80),
                                                               ", ".join(sorted(known)))
    return "%s breaks the rule %s: %s (it is %s)" % (where, rule, _short(_dumps(want), 60), got)


def _hash64(*parts: str) -> int:
    """A hash that is the same in every process and on every machine (unlike hash())."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()[:8], "big")


def _shard_plan(names: List[str], n: int, durations: Optional[Dict[str, float]] = None) -> List[int]:
    """The shard (0 .. n-1) of each flow in `names`: a pure function of the multiset of names, `n` and
    `durations`, so every CI job computes the same split whatever the order of the list.
    Without durations (bounded-load rendezvous hashing): each flow ranks the shards by a hash of
    (its name, the shard) and takes the first one not yet full (floor(len/n) flows, or one more
    while fewer than len % n shards hold more), the flows taken in the order of a hash of their
    names.  Shards differ by at most one flow, and adding or removing a flow moves few others (a
    plain hash moves none but leaves shards uneven; a round-robin over a sorted list moves most).
    With durations (milliseconds per name, from a previous run): longest first, each flow to the
    shard with the least time so far, ties to the flow's preferred shard; a flow the file does not
    know counts as the median of the known ones."""
    m = len(names)
    out = [0] * m
    if n <= 1 or not m:
        return out

    def ranks(i: int) -> List[int]:
        return sorted(range(n), key=lambda s: (-_hash64(names[i], str(s)), s))
    order = sorted(range(m), key=lambda i: (_hash64(names[i]), names[i], i))
    known = [float(durations[x]) for x in names if durations and x in durations]
    if not known:
        low, extra = divmod(m, n)  # `extra` shards hold low + 1 flows, the others low
        count = [0] * n
        for i in order:
            big = sum(1 for c in count if c > low)
            out[i] = next(s for s in ranks(i) if count[s] < low or (count[s] == low and big < extra))
            count[out[i]] += 1
        return out
    middle = sorted(known)[len(known) // 2]
    weight = [float(durations[x]) if durations and x in durations else middle for x in names]
    load = [0.0] * n
    for i in sorted(order, key=lambda i: -weight[i]):  # stable: equal weights keep the hash order
        pref = ranks(i)
        out[i] = min(range(n), key=lambda s: (load[s], pref.index(s)))
        load[out[i]] += weight[i]
    return out


def _durations_of(doc: Any) -> Dict[str, float]:
    """Milliseconds per flow name from a previous run's `--json` results (of verify or of a merge);
    ValueError naming what is wrong otherwise."""
    flows = doc.get("flows") if isinstance(doc, dict) else None
    if not isinstance(flows, list):
        raise ValueError("it is not the --json output of `reticle verify` or `reticle report merge` "
                         "(an object with a `flows` list)")
    problem = _results_problem(doc)
    if problem:
        raise ValueError("it is not the --json output of `reticle verify` or `reticle report merge`: %s" % problem)
    out: Dict[str, float] = {}
    for r in flows:
        if isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("ms"), (int, float)) \
                and not isinstance(r.get("ms"), bool) and 0 <= r["ms"] < float("inf"):
            out[r["name"]] = float(r["ms"]) + out.get(r["name"], 0.0)
    return out


def _merge_error(name: str, error: str) -> dict:
    return {"name": name, "verified": "error", "verifiedReason": "flow_error", "steps": [], "ms": 0, "error": error}


def _merge_shards(docs: List[Tuple[str, Any]]) -> List[dict]:
    """The results of one run from its shards' `--json` results ((file, parsed JSON) each), in the
    unsharded order, each flow marked with its `shard` ("i/n").  Anything that would make the merged
    verdict differ from one run's is an error result (exit 3), never dropped: a file that is not
    shard results, shards of different sizes or flow selections, a shard missing or given twice, a
    flow that ran in no shard or in two."""
    problems: List[str] = []
    seen: Dict[int, str] = {}
    totals = set()
    selections: Dict[str, List[str]] = {}
    parts: List[Tuple[str, List[dict]]] = []
    for path, doc in docs:
        info = doc.get("shard") if isinstance(doc, dict) else None
        flows = doc.get("flows") if isinstance(doc, dict) else None
        if not isinstance(flows, list):
            problems.append("%s is not `reticle verify --json` output (an object with a `flows` list)" % path)
            continue
        problem = _results_problem(doc)
        if problem is None and isinstance(info, dict) and info["index"] > info["total"]:
            problem = "shard.index is %d, past shard.total %d" % (info["index"], info["total"])
        if problem:
            problems.append("%s is not `reticle verify --json` output: %s" % (path, problem))
            continue
        if info is None:
            if len(docs) > 1:
                problems.append("%s holds no `shard` (was it run with --shard I/N?)" % path)
                continue
            info = {"index": 1, "total": 1, "selected": [r["name"] for r in flows]}
        totals.add(info["total"])
        if info["index"] in seen:
            problems.append("shard %d/%d is given twice: %s and %s" % (info["index"], info["total"],
                                                                      seen[info["index"]], path))
            continue
        seen[info["index"]] = path
        selections[path] = [str(x) for x in info["selected"]]
        parts.append(("%d/%d" % (info["index"], info["total"]), flows))
    if len(totals) > 1:
        problems.append("the files come from different shard counts (%s)" % ", ".join(
            "/%d" % t for t in sorted(totals)))
    elif totals:
        total = totals.pop()
        missing = [str(i) for i in range(1, total + 1) if i not in seen]
        if missing:
            problems.append("shard(s) %s of %d missing: no results file for them" % (", ".join(missing), total))
    if len({tuple(v) for v in selections.values()}) > 1:
        problems.append("the shards were split from different flow selections (%s): run every shard with the "
                        "same FLOWS" % "; ".join("%s: %d flows" % (p, len(v)) for p, v in selections.items()))
    selected = next(iter(selections.values()), [])
    return _merge_flows(parts, selected) + [_merge_error("(merge)", p) for p in problems]


def _merge_flows(parts: List[Tuple[str, List[dict]]], selected: List[str]) -> List[dict]:
    """Each selected flow's one result (marked with its shard), in the selection's order; a flow that
    ran in no shard or in more than one is an error result naming the shards; a result no shard
    selected (a setup error about the run, such as a stranger on the port) is kept, once."""
    by_name: Dict[str, List[dict]] = {}
    extra: List[dict] = []
    want = collections.Counter(selected)
    for label, flows in parts:
        for r in flows:
            r = dict(r, shard=label)
            if r["name"] in want and r.get("setupOnly"):
                continue  # a shard ran it for its own flows; the shard that drew it reports it
            if r["name"] in want:
                by_name.setdefault(r["name"], []).append(r)
            elif not any(x["name"] == r["name"] and x.get("error") == r.get("error") for x in extra):
                extra.append(r)
    out: List[dict] = []
    for name in sorted(want, key=selected.index):
        got = by_name.get(name, [])
        if len(got) == want[name]:
            out.extend(got)
        elif not got:
            out.append(_merge_error(name, "the flow ran in no shard (is a shard's results file missing?)"))
        else:
            out.append(_merge_error(name, "the flow ran %d times, in shards %s, where it was selected %d time(s): "
                                          "the shards were not split alike (the same FLOWS and --durations file "
                                          "in every job)" % (len(got), ", ".join(r["shard"] for r in got),
                                                             want[name])))
    return out + extra


# ---- flows: save the journey a tab just went through, list them, replay one (Flows section) ----

def _journey_to_save(hub: "Hub", tab: str, since: float, replayed: bool) -> List[dict]:
    """The steps of tab's journey since `since` that flow_save saves: the agent's own, and a flow's
    replayed steps only when asked (`replayed`); ToolError when there are none."""
    journey = hub.journeys.since(tab, since)
    left_out = [s for s in journey if s.get("replayed")] if not replayed else []
    journey = [s for s in journey if replayed or not s.get("replayed")]  # a replay is not the agent's journey
    if not journey:
        raise ToolError("tab %s has no recorded step since %s to save%s" % (
            tab, since, " (its %d step(s) since then were a flow's replay, not the agent's own)" % len(left_out)
            if left_out else ""),
            "act with reticle_act_and_wait / reticle_act and check with reticle_assert first, pass `steps`, "
            "or `replayed: true` to save a replay's steps as a flow of their own")
    return journey


async def _tool_flow_save(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                          ctx: "_CallContext") -> dict:
    """reticle_flow_save: write a flow (given `steps`, or the tab's recorded journey since `since`) to
    the project's flows folder, atomically.  A journey is saved only when every step in it was
    verified and every target survives a reload; a typed secret is kept as a ${NAME} variable (its
    value is never stored) bound to the start origin."""
    name = _flow_name(args["name"])
    root = _project_dir(hub)
    start = args.get("startUrl")
    warnings: List[str] = []
    suggestions: List[str] = []
    if args.get("steps"):
        steps = [_no_plain_secret(dict(s)) for s in args["steps"]]
    else:
        session = await hub.resolve_tab(args, ctx)
        since = args.get("since")
        if since is None:
            since = hub.journeys.saved_at.get(session.id, 0.0)
        journey = _journey_to_save(hub, session.id, float(since), bool(args.get("replayed")))
        journey = _one_origin(journey, _origin_of(args.get("origin")) or _origin_of(start))
        not_yes = [i for i, s in enumerate(journey) if s.get("verified") not in (None, "yes")]
        if not_yes:
            i = not_yes[-1]
            raise ToolError("step %d of the journey (%s) was %s, so this journey is not verified"
                            % (i, _step_label(journey[i]), journey[i]["verified"]),
                            "pass `since` from the result of the first act after it (its `since`), or `steps`",
                            steps=[_step_label(s) for s in journey])
        blind = [i for i, s in enumerate(journey) if "action" in s and not s.get("target") and s["action"] != "press"]
        if blind:
            raise ToolError("step %d (%s) has no target that survives a reload (the ref could not be described)"
                            % (blind[0], journey[blind[0]]["action"]), "act by `target` instead of `ref`")
        steps, first_url = _steps_from_journey(journey)
        warnings = _toothless_warnings(journey)
        suggestions = _server_check_suggestions(journey) if session.server_seen else []
        start = start or first_url
        hub.journeys.saved_at[session.id] = hub.clock()
    flow: Dict[str, Any] = {"format": FLOW_FORMAT, "name": name,
                            "savedAt": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if start:
        flow["startUrl"] = start
    for key in ("setup", "auth"):
        if args.get(key):
            flow[key] = args[key]
    if _origin_of(start):
        steps = [dict(s, secretOrigin=_origin_of(start)) if s.get("secret") and not s.get("secretOrigin") else s
                 for s in steps]
    flow["steps"] = steps
    if not any("until" in s or "assert" in s for s in steps):
        flow["note"] = "no predicate: a replay shows the steps ran, not that they worked"
    problems = _flow_problems(flow)
    if problems:
        raise ToolError("the flow is not valid: %s" % "; ".join(problems), "fix the steps and save again")
    path = _flow_path(root, name)
    replaced = os.path.exists(path)
    data = (json.dumps(flow, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp-%s" % secrets.token_hex(3)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    out = {"saved": path, "name": name, "steps": len(steps), "replaced": replaced,
           "verdicts": sum(1 for s in steps if "until" in s or "assert" in s)}
    if warnings:
        out["warnings"] = warnings
    if suggestions:
        out["suggestions"] = suggestions
    names = sorted({s["secret"] for s in steps if s.get("secret")})
    if names:
        out["secrets"] = names
        out["note"] = "typed secrets are not stored; replay reads them from %s" % ", ".join(names)
    if flow.get("setup") and session is not None and not args.get("steps"):
        out["authSaved"] = await _keep_auth(hub, session, name)  # the login this journey just verified
    return out


async def _tool_flow_list(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                          ctx: "_CallContext") -> dict:
    root = _project_dir(hub)
    # off the loop: the files are the project's, on whatever disk it is (each read is bounded and never
    # waits on a FIFO, see _read_regular)
    flows = await asyncio.get_running_loop().run_in_executor(None, _list_flows, root)
    return {"dir": _flows_dir(root), "flows": flows}


async def _tool_flow_replay(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_flow_replay: replay a saved flow (by `name`) or a given one on this tab, with secrets
    from the caller.  A bad flow, a missing secret or a bad fault is a setup error before any step
    acts; `faults` hold for this replay only and are cleared after it, whatever happens."""
    if args.get("flow") is not None:
        flow = args["flow"]
        problems = _flow_problems(flow)
        if problems:
            raise ToolError("`flow` is not a Reticle flow: %s" % "; ".join(problems), "pass a saved flow's JSON",
                            setup=True)
    elif args.get("name"):
        flow = await asyncio.get_running_loop().run_in_executor(None, _read_flow, _project_dir(hub), args["name"])
    else:
        raise ToolError("reticle_flow_replay needs `name` (a saved flow) or `flow`.", 'for example {"name": "login"}')
    given = args.get("secrets") or {}
    setup = args.get("setupFlow")
    if setup is not None and _flow_problems(setup):
        raise ToolError("`setupFlow` is not a Reticle flow: %s" % "; ".join(_flow_problems(setup)),
                        "pass the setup flow's JSON, or leave it out to use the saved one", setup=True)
    _fill_secrets([s.get("args") for s in flow["steps"]], given)  # a missing secret: a setup error, before any act
    if not args.get("faults"):
        return await _replay_flow(hub, session, flow, args.get("url"), ctx, bool(args.get("fresh")), given, setup)
    set_ids = []
    try:  # the faults hold for this replay only, on this tab, and are gone after it whatever happens
        for i, spec in enumerate(args["faults"]):
            problem = _fault_spec_problem(spec)
            if problem:
                raise ToolError("faults/%d: %s" % (i, problem), "each fault is a reticle_fault {match, respond | "
                                "abort | delayMs, times?, ttlMs?}", setup=True)
            set_ids.append(hub.faults.add(session, ctx.session_key, spec).id)
        await hub.faults.sync(session.id)
        out = await _replay_flow(hub, session, flow, args.get("url"), ctx, bool(args.get("fresh")), given, setup,
                                 retry=False)
        out["faults"] = [f.public(hub.clock()) for f in hub.faults.tabs.get(session.id, {}).values()
                         if f.id in set_ids]
        return out
    finally:
        for fid in set_ids:
            hub.faults.clear(session.id, ctx.session_key, fid)
        if set_ids:
            await _quietly(hub.faults.sync(session.id))
