"""The in-page SDK as served bytes: content type, ETag/304, the version on
its first line, no token inside, one config token replaced, valid JS."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
import tornado.testing
from tornado.testing import gen_test

import reticle


class SdkCase(tornado.testing.AsyncHTTPTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="reticle-sdk-")
        super().setUp()

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def get_app(self):
        self.hub = reticle.Hub(state_dir=os.path.join(self.tmp, "state"), port=4400)
        return reticle.make_app(self.hub)

    async def get(self, headers=None):
        return await self.http_client.fetch(self.get_url("/reticle.js"), headers=headers, raise_error=False)

    @gen_test
    async def test_served_with_version_and_type(self):
        resp = await self.get()
        assert resp.code == 200
        assert resp.headers["Content-Type"] == "application/javascript; charset=utf-8"
        body = resp.body.decode("utf-8")
        assert body.splitlines()[0] == "/*! reticle-sdk %s */" % reticle.__version__
        assert "__RETICLE_VERSION__" not in body
        assert "/*__RETICLE_CONFIG__*/" not in body
        config = json.loads(re.search(r"var CONFIG = (\{.*?\});", body).group(1))
        assert config["version"] == reticle.__version__
        assert config["maxMessageBytes"] == reticle.WS_MAX_MESSAGE_BYTES

    @gen_test
    async def test_etag_and_304(self):
        first = await self.get()
        etag = first.headers["Etag"]
        again = await self.get({"If-None-Match": etag})
        assert again.code == 304 and again.body == b""
        changed = await self.get({"If-None-Match": '"something-else"'})
        assert changed.code == 200

    @gen_test
    async def test_never_contains_the_pairing_token(self):
        token = self.hub.token()
        assert len(token) >= 32
        resp = await self.get()
        assert token.encode() not in resp.body

    @gen_test
    async def test_a_foreign_referer_is_refused_an_allow_listed_one_is_served(self):
        resp = await self.get({"Referer": "https://evil.example/page"})
        assert resp.code == 403
        refusal = json.loads(resp.body)
        assert refusal["error"] == "forbidden"
        assert "the Referer header 'https://evil.example/page' is not a loopback page" in refusal["detail"]
        self.hub.allowed_origins = ("https://app.example",)
        resp = await self.get({"Referer": "https://app.example/checkout"})
        assert resp.code == 200, "a script tag on an allow-listed page sends its Referer"
        resp = await self.get({"Origin": "https://app.example"})
        assert resp.code == 200
        other = await self.http_client.fetch(self.get_url("/status"), headers={"Origin": "https://app.example"},
                                             raise_error=False)
        assert other.code == 403, "the allow-list opens the SDK and the bridge only, not the API"
        refusal = json.loads(other.body)
        assert refusal["error"] == "forbidden"
        assert "the Origin header 'https://app.example' is not a loopback page" in refusal["detail"]


def test_single_iife_exposing_only_window_reticle():
    src = reticle._SDK_JS
    assert '"""' not in src
    assert src.count("/*__RETICLE_CONFIG__*/null") == 1
    lines = [ln for ln in src.splitlines() if ln.strip() and not ln.startswith("/*") and not ln.startswith("   ")]
    assert lines[0].startswith("(function")
    assert src.rstrip().endswith("})();")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_check_passes(tmp_path):
    hub = reticle.Hub(state_dir=str(tmp_path / "state"))
    path = tmp_path / "reticle.js"
    path.write_text(hub.sdk_source(), encoding="utf-8")
    result = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python_commands():
    """Every bridge command name the Python side sends (session.command("name", ...))."""
    folder = os.path.join(ROOT, "src", "reticle")
    source = ""
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                source += f.read()
    sent = set(re.findall(r'\.command\(\s*"([a-z_]+)"', source))
    # reticle_navigate picks one of two names in a conditional expression
    sent |= set(re.findall(r'\(\s*"([a-z_]+)",\s*\{[^}]*\}\)\s*if args.get\("reload"\)', source))
    sent |= set(re.findall(r'else \(\s*"([a-z_]+)",', source))
    return sent


def _sdk_commands():
    return set(re.findall(r"^\s*COMMANDS\.([a-z_]+)\s*=", reticle._SDK_JS, re.M))


def test_bridge_commands_match_both_ways():
    sent, table = _python_commands(), _sdk_commands()
    assert {"snapshot", "act", "eval_probe", "navigate", "refresh"} <= sent, sent
    assert sent - table == set(), "sent by Python but missing from the SDK's COMMANDS: %s" % sorted(sent - table)
    assert table - sent == set(), "in the SDK's COMMANDS but never sent by Python: %s" % sorted(table - sent)


# The SDK's named sections, in the order they stand in the IIFE (README "Working on Reticle").
SDK_SECTIONS = ["config", "relay", "helpers", "events", "transport", "refs", "semantics", "snapshot", "query",
                "actions", "observers", "network", "alerts", "console", "documents", "dom", "storage", "health",
                "stores", "probes", "commands", "connect"]


def test_sdk_sections_stand_in_order():
    """Each section has its `// == Section: name ==` banner, once, in the fixed order, with code under it;
    the natives are captured in the first section, before any function that patches the page."""
    src = reticle._SDK_JS
    banners = re.findall(r"^  // == Section: ([a-z ]+?) ==", src, re.M)
    assert banners == SDK_SECTIONS, banners
    assert len(re.findall(r"^\s*// == ", src, re.M)) == len(SDK_SECTIONS), "a // == line that is no section banner"
    parts = re.split(r"^  // == Section: [a-z ]+ ==.*$", src, flags=re.M)[1:]
    for name, body in zip(SDK_SECTIONS, parts):
        assert re.search(r"^  (function |var |COMMANDS\.|try \{)", body, re.M), "section %s is empty" % name
    assert "var N = {};" in parts[0] and "N.MutationObserver = w.MutationObserver;" in parts[0]
    assert src.index("N.fetch = w.fetch;") < src.index("function patch(")


def test_sdk_has_no_stub_commands():
    assert "not supported by this SDK" not in reticle._SDK_JS


def test_sdk_lines_are_wrapped():
    """Lines are wrapped as a formatter wraps JavaScript: only a lone string or regex literal,
    which no formatter breaks, may run past 120 characters."""
    lone_literal = re.compile(r"""^\s*(/.*/[gimsuy]*(\.test\()?|'.*'|"'.*"|\S+ \+ '.*'|'.*' \+ \S+);?,?$""")
    long_lines = [n for n, line in enumerate(reticle._SDK_JS.splitlines(), 1)
                  if len(line) > 120 and not lone_literal.match(line)]
    assert long_lines == [], "SDK lines over 120 characters: %s" % long_lines[:10]


_ESLINT = os.path.join(ROOT, "tests", ".js", "node_modules", ".bin", "eslint")


@pytest.mark.skipif(shutil.which("node") is None or not os.path.exists(_ESLINT),
                    reason="node or ESLint is not installed (sh tests/bootstrap.sh installs ESLint)")
def test_sdk_lint_is_clean_and_catches_dead_code(tmp_path):
    """tools/sdk.py lint passes on the in-page scripts of src/sdk/, and fails on an SDK with an unused
    function, an undefined name, unreachable code and a function over 80 lines in it, naming the section
    file and the line where each was planted."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "sdk.py"), "lint"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    work = tmp_path / "tree"
    (work / "tools").mkdir(parents=True)
    (work / "tests").mkdir()
    os.symlink(os.path.join(ROOT, "tests", ".js"), str(work / "tests" / ".js"))
    shutil.copy(os.path.join(ROOT, "tools", "sdk.py"), str(work / "tools" / "sdk.py"))
    shutil.copy(os.path.join(ROOT, "tools", "eslint.config.mjs"), str(work / "tools" / "eslint.config.mjs"))
    shutil.copytree(os.path.join(ROOT, "src", "sdk"), str(work / "src" / "sdk"))
    planted = ("  function plantedNeverCalled() { return 1; }\n"
               "  function plantedUndefined() { return notDefinedAnywhere + 1; }\n"
               "  function plantedUnreachable() { return 2; plantedUndefined(); }\n"
               "  plantedUnreachable();\n"
               "  function plantedLong() {\n" + "    plantedUnreachable();\n" * 81 + "  }\n"
               "  plantedLong();\n")
    section = work / "src" / "sdk" / "reticle" / "13_alerts.js"
    text = section.read_text(encoding="utf-8")
    section.write_text(planted + text, encoding="utf-8")
    done = subprocess.run([sys.executable, str(work / "tools" / "sdk.py"), "lint"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    for rule in ("no-unused-vars", "no-undef", "no-unreachable", "max-lines-per-function"):
        assert rule in done.stdout, (rule, done.stdout)
    assert "src/sdk/reticle/13_alerts.js:1:12 no-unused-vars 'plantedNeverCalled'" in done.stdout, done.stdout
    assert "src/sdk/reticle/13_alerts.js:2:" in done.stdout and "notDefinedAnywhere" in done.stdout, done.stdout
    relay = work / "src" / "sdk" / "relay.js"
    relay.write_text(relay.read_text(encoding="utf-8").replace("post({op: 'buffered'", "poost({op: 'buffered'"),
                     encoding="utf-8")
    done = subprocess.run([sys.executable, str(work / "tools" / "sdk.py"), "lint"],
                          capture_output=True, text=True, timeout=120)
    assert re.search(r"src/sdk/relay\.js:\d+:\d+ no-undef 'poost'", done.stdout), done.stdout


def test_each_sdk_section_says_what_it_provides_and_uses(tmp_path):
    """Each section of the SDK opens with what it declares for the others and what it takes from them
    (tools/sdk.py headers writes both); a section that starts using another's name without saying so is
    caught."""
    sdk = os.path.join(ROOT, "tools", "sdk.py")
    done = subprocess.run([sys.executable, sdk, "headers", "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(os.path.join(ROOT, "src", "sdk", "reticle", "21_commands.js"), encoding="utf-8") as f:
        head = f.read().split("// ----", 1)[0]
    assert "// uses: " in head and "snapshot (08)" in head and "evalProbe (20)" in head
    work = tmp_path / "tree"
    (work / "tools").mkdir(parents=True)
    shutil.copy(sdk, str(work / "tools" / "sdk.py"))
    shutil.copytree(os.path.join(ROOT, "src", "sdk"), str(work / "src" / "sdk"))
    section = work / "src" / "sdk" / "reticle" / "14_console.js"
    section.write_text(section.read_text(encoding="utf-8") + "  storageRead();\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(work / "tools" / "sdk.py"), "headers", "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "14_console.js: its provides/uses header" in done.stdout, done.stdout
