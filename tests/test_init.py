"""`reticle init` (DESIGN section 10) on sample projects in temporary directories, run as the CLI
is run (a subprocess, HOME pointed at a temporary directory): the dev-only script tag, the four MCP
client configurations merged with what was there, the CSP warning, --dry-run, and a second run
that changes nothing."""

import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import RETICLE_PY, daemon_env  # noqa: E402

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def _init(project, home, *argv):
    env = daemon_env(home / "state", HOME=str(home))
    env.pop("CODEX_HOME", None)
    run = subprocess.run([sys.executable, RETICLE_PY, "init"] + list(argv), cwd=str(project), env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, (run.stdout, run.stderr)
    return run.stdout


def _snapshot(*roots):
    out = {}
    for root in roots:
        for dirpath, _, files in os.walk(str(root)):
            for f in files:
                path = os.path.join(dirpath, f)
                with open(path, "rb") as fh:
                    out[path] = fh.read()
    return out


def _server(path, key="mcpServers"):
    entry = json.loads(path.read_text())[key]["reticle"]
    assert "mcp" in entry["args"] and entry["command"], entry
    return entry


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    (h / ".codex").mkdir(parents=True)
    (h / ".codex" / "config.toml").write_text('model = "o3"\n\n[mcp_servers.other]\ncommand = "other-mcp"\n')
    return h


def test_vite_project_gets_the_tag_and_four_merged_configs_and_a_second_run_changes_nothing(tmp_path, home):
    project = tmp_path / "vite-app"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "x", "devDependencies": {"vite": "^5.0.0"}}))
    (project / "index.html").write_text('<!doctype html>\n<html>\n<head>\n<title>App</title>\n</head>\n'
                                        '<body><div id="app"></div><script type="module" src="/src/main.js">'
                                        '</script></body>\n</html>\n')
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "db-mcp", "args": []}},
                                                   "extra": True}))
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"gh": {"type": "http", "url": "https://x"}},
                                                              "inputs": []}))
    out = _init(project, home, "--yes")
    assert "Vite" in out and "index.html" in out, out
    html = (project / "index.html").read_text()
    head = html[:html.index("</head>")]
    assert "import.meta.env.DEV" in head and "http://127.0.0.1:4400/reticle.js" in head, html
    assert html.count("reticle.js") == 1 and '<script type="module" src="/src/main.js">' in html
    claude = json.loads((project / ".mcp.json").read_text())
    assert claude["extra"] is True and claude["mcpServers"]["db"] == {"command": "db-mcp", "args": []}
    _server(project / ".mcp.json")
    _server(project / ".cursor" / "mcp.json")
    vscode = json.loads((project / ".vscode" / "mcp.json").read_text())
    assert vscode["servers"]["gh"] == {"type": "http", "url": "https://x"} and vscode["inputs"] == []
    assert _server(project / ".vscode" / "mcp.json", "servers")["type"] == "stdio"
    codex_text = (home / ".codex" / "config.toml").read_text()
    assert codex_text.startswith('model = "o3"\n\n[mcp_servers.other]\ncommand = "other-mcp"\n'), codex_text
    if tomllib is not None:
        codex = tomllib.loads(codex_text)
        assert codex["model"] == "o3" and codex["mcp_servers"]["other"] == {"command": "other-mcp"}
        assert codex["mcp_servers"]["reticle"]["args"][-1] == "mcp"
    else:
        assert "[mcp_servers.reticle]" in codex_text
    before = _snapshot(project, home / ".codex")
    out = _init(project, home, "--yes")
    assert "nothing to change" in out, out
    assert _snapshot(project, home / ".codex") == before


def test_plain_html_gets_a_localhost_only_tag_and_a_csp_warning(tmp_path, home):
    project = tmp_path / "site"
    project.mkdir()
    (project / "index.html").write_text(
        '<!doctype html><html><head><meta http-equiv="Content-Security-Policy" '
        'content="default-src \'self\'; script-src \'self\'"><title>t</title></head><body>hi</body></html>')
    out = _init(project, home, "--yes")
    assert "plain HTML" in out and "warning:" in out and "script-src" in out and "connect-src" in out, out
    html = (project / "index.html").read_text()
    assert "location.hostname" in html and html.index("reticle.js") < html.index("</head>"), html
    assert "nothing to change" in _init(project, home, "--yes")


def test_django_dry_run_writes_nothing_then_no_template_is_edited_and_the_middleware_goes_in(tmp_path, home):
    """Issue 27 #2: `{% if debug %}` renders nothing on a default project (no debug context processor
    without INTERNAL_IPS): init edits no template; the middleware under DEBUG adds the tag to each page.
    MCP entries name the port when it is not the default."""
    project = tmp_path / "shop"
    (project / "shop").mkdir(parents=True)
    (project / "manage.py").write_text("import django\n")
    (project / "shop" / "settings.py").write_text("DEBUG = True\nMIDDLEWARE = []\n")
    templates = project / "orders" / "templates"
    templates.mkdir(parents=True)
    (templates / "base.html").write_text("<html><head>{% block head %}{% endblock %}</head><body></body></html>\n")
    (templates / "list.html").write_text('{% extends "base.html" %}\n')
    before = _snapshot(project, home)
    out = _init(project, home, "--dry-run", "--port", "4411")
    assert "Django" in out and "would change" in out and "dry run" in out, out
    assert "{% if debug %}" not in out and "no template is edited" in out and "RETICLE_PORT=4411" in out, out
    assert _snapshot(project, home) == before
    _init(project, home, "--yes", "--port", "4411")
    assert (templates / "base.html").read_text() == \
        "<html><head>{% block head %}{% endblock %}</head><body></body></html>\n"
    assert (templates / "list.html").read_text() == '{% extends "base.html" %}\n'
    assert "reticle.DjangoMiddleware" in (project / "shop" / "settings.py").read_text()
    for path, key in ((".mcp.json", "mcpServers"), (".cursor/mcp.json", "mcpServers"), (".vscode/mcp.json", "servers")):
        assert _server(project / path, key)["args"][-3:] == ["mcp", "--port", "4411"]
    codex = (home / ".codex" / "config.toml").read_text()
    assert '"mcp", "--port", "4411"]' in codex, codex
    assert "nothing to change" in _init(project, home, "--yes", "--port", "4411")


def test_next_js_gets_the_exact_snippet_printed_and_no_source_edited(tmp_path, home):
    project = tmp_path / "next-app"
    (project / "app").mkdir(parents=True)
    (project / "package.json").write_text(json.dumps({"dependencies": {"next": "14.2.0", "react": "18"}}))
    (project / "app" / "layout.tsx").write_text("export default function L({children}) { return children }\n")
    out = _init(project, home, "--yes", "--port", "4411")
    assert "Next.js" in out and "http://127.0.0.1:4411/reticle.js" in out and "NODE_ENV" in out, out
    assert (project / "app" / "layout.tsx").read_text() == "export default function L({children}) { return children }\n"
    _server(project / ".mcp.json")


# -- issue 19 #10, #11, #24 -------------------------------------------------------------------------

def _init_run(project, home, *argv):
    env = daemon_env(home / "state", HOME=str(home))
    env.pop("CODEX_HOME", None)
    return subprocess.run([sys.executable, RETICLE_PY, "init"] + list(argv), cwd=str(project), env=env,
                          capture_output=True, text=True, timeout=60)


def test_init_never_writes_through_a_symbolic_link(tmp_path, home):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "servers.json").write_text('{"mcpServers": {}}')
    (outside / "index.html").write_text("<html><head></head><body></body></html>")
    (outside / "vscode").mkdir()
    project = tmp_path / "site"
    project.mkdir()
    (project / "index.html").symlink_to(outside / "index.html")          # an outside HTML file
    (project / ".mcp.json").symlink_to(outside / "servers.json")         # an outside JSON file
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").symlink_to(outside / "nowhere.json")  # a dangling link
    (project / ".vscode").symlink_to(outside / "vscode")                  # a symlinked folder
    before = _snapshot(outside)
    run = _init_run(project, home, "--yes")
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert _snapshot(outside) == before, run.stdout
    assert not (outside / "nowhere.json").exists() and not (outside / "vscode" / "mcp.json").exists()
    assert run.stdout.count("symbolic link") >= 4, run.stdout


def test_init_keeps_codex_and_json_configs_valid(tmp_path, home):
    project = tmp_path / "site"
    project.mkdir()
    (project / "index.html").write_text("<html><head></head><body></body></html>")
    config = home / ".codex" / "config.toml"
    for text in ('[mcp_servers]\nreticle = { command = "reticle", args = ["mcp"] }\n',
                 'mcp_servers.reticle.command = "reticle"\n'):
        config.write_text(text)
        run = _init_run(project, home, "--yes")
        assert config.read_text() == text and "already has" in run.stdout, (text, run.stdout)
    config.write_text('model = "o3\n[broken\n')
    run = _init_run(project, home, "--yes")
    assert config.read_text() == 'model = "o3\n[broken\n' and "not valid TOML" in run.stdout, run.stdout
    for bad in ('{"mcpServers": {"x": {"timeout": 1e999}}}',
                '{"mcpServers": {"a": {"command": "a"}}, "mcpServers": {"b": {"command": "b"}}}'):
        (project / ".mcp.json").write_text(bad)
        run = _init_run(project, home, "--yes")
        assert (project / ".mcp.json").read_text() == bad and "not valid strict JSON" in run.stdout, run.stdout


def test_init_reads_a_csp_that_allows_the_daemon_and_suggests_what_works(tmp_path, home):
    project = tmp_path / "site"
    project.mkdir()
    (project / "index.html").write_text(
        '<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'self\'; '
        'script-src \'self\' \'unsafe-inline\' 127.0.0.1:4400; connect-src \'self\' ws://127.0.0.1:*">'
        '<title>t</title></head><body>hi</body></html>')
    out = _init(project, home, "--dry-run", "--port", "4400")
    assert "warning:" not in out, out
    (project / "index.html").write_text(
        '<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="script-src \'self\' '
        'http://127.0.0.1:4400"><title>t</title></head><body>hi</body></html>')
    out = _init(project, home, "--dry-run", "--port", "4400")
    assert "'unsafe-inline'" in out, out
    assert '<script src="http://127.0.0.1:4400/reticle.js"></script>' in out, out


def test_django_settings_get_the_server_middleware_under_debug_once(tmp_path, home):
    project = tmp_path / "shop"
    (project / "shop").mkdir(parents=True)
    (project / "manage.py").write_text("import django\n")
    settings = project / "shop" / "settings.py"
    settings.write_text('DEBUG = True\nMIDDLEWARE = (\n    "django.middleware.common.CommonMiddleware",\n)\n')
    out = _init(project, home, "--dry-run")
    assert "reticle.DjangoMiddleware" in out and "under DEBUG" in out, out
    _init(project, home, "--yes")
    text = settings.read_text()
    assert 'if DEBUG:' in text and '    MIDDLEWARE = [*MIDDLEWARE, "reticle.DjangoMiddleware"]' in text, text
    scope = {}
    exec(compile(text, str(settings), "exec"), scope)  # the edited settings still run, with the entry added
    assert scope["MIDDLEWARE"] == ["django.middleware.common.CommonMiddleware", "reticle.DjangoMiddleware"]
    scope = {}
    exec(compile(text.replace("DEBUG = True", "DEBUG = False"), str(settings), "exec"), scope)
    assert "reticle.DjangoMiddleware" not in scope["MIDDLEWARE"]
    again = _init(project, home, "--yes")
    assert "already has reticle.DjangoMiddleware" in again and settings.read_text() == text


@pytest.mark.parametrize("framework, source, line", [
    ("Flask", "from flask import Flask\napp = Flask(__name__)\n", "app.wsgi_app = reticle.wsgi(app.wsgi_app)"),
    ("FastAPI", "from fastapi import FastAPI\napp = FastAPI()\n", "app = reticle.asgi(app)"),
])
def test_flask_and_fastapi_get_the_dev_only_wrap_printed_and_their_source_left_alone(tmp_path, home, framework,
                                                                                      source, line):
    project = tmp_path / "api"
    project.mkdir()
    (project / "app.py").write_text(source)
    out = _init(project, home, "--yes")
    assert "app: %s" % framework in out and line in out and "reticle_observe" in out, out
    assert (project / "app.py").read_text() == source


# -- issue 27 #2: a real `django-admin startproject` project, init, runserver, a real browser --------

MANUAL_VIEW = '''

from django.http import HttpResponse  # noqa: E402  (added by the test: a page with a hand-written tag)
from django.views.debug import default_urlconf  # noqa: E402


def manual(request):
    return HttpResponse('<!doctype html><html><head><title>manual</title>'
                        '<script src="http://127.0.0.1:%d/reticle.js"></script></head><body>hi</body></html>')


urlpatterns += [path("manual/", manual), path("", default_urlconf)]  # "/" stays Django's own start page
'''


@pytest.mark.browser
def test_init_on_a_startproject_project_connects_a_session_by_the_middleware_and_by_a_manual_tag(tmp_path, home):
    """After `reticle init` on a fresh `django-admin startproject` (Django's defaults: SecurityMiddleware's
    Referrer-Policy same-origin, no debug context processor), `manage.py runserver` in real headless
    Chromium connects a session to a real daemon: through the tag the middleware adds to Django's own
    page, and through a hand-written tag on a page opened as localhost (cross-site to 127.0.0.1)."""
    import urllib.request
    from _harness import Browser, Daemon, Mcp, free_port, port_listens, wait_until
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "django", "startproject", "mysite", str(project)], check=True, timeout=60)
    daemon = Daemon(tmp_path / "state")
    opened = [daemon]
    try:
        out = _init(project, home, "--yes", "--port", str(daemon.port))
        settings = (project / "mysite" / "settings.py").read_text()
        assert "reticle.DjangoMiddleware" in settings and "{% if debug %}" not in out, out
        assert _server(project / ".mcp.json")["args"][-2:] == ["--port", str(daemon.port)]
        with open(project / "mysite" / "urls.py", "a") as fh:
            fh.write(MANUAL_VIEW % daemon.port)
        port = free_port()
        log = open(tmp_path / "runserver.log", "wb")
        env = daemon_env(daemon.state_dir, RETICLE_PORT=daemon.port,
                         PYTHONPATH=os.pathsep.join([os.path.dirname(RETICLE_PY), os.environ.get("PYTHONPATH", "")]))
        server = subprocess.Popen([sys.executable, "manage.py", "runserver", "127.0.0.1:%d" % port, "--noreload"],
                                  cwd=str(project), env=env, stdout=log, stderr=subprocess.STDOUT)
        opened.append(type("Proc", (), {"close": lambda self: (server.terminate(), server.wait(10), log.close())})())
        wait_until(lambda: port_listens(port) or server.poll() is not None, 30, what="runserver")
        assert server.poll() is None, (tmp_path / "runserver.log").read_text()
        with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10) as resp:
            raw = resp.read()
            page = raw.decode()
            assert resp.headers["Referrer-Policy"] == "same-origin"
            assert resp.headers["Content-Length"] == str(len(raw))
        assert page.count('<script src="http://127.0.0.1:%d/reticle.js"></script></head>' % daemon.port) == 1, page
        mcp = Mcp(daemon.url + "/mcp")
        opened.append(mcp)
        for url in ("http://127.0.0.1:%d/" % port, "http://localhost:%d/manual/" % port):
            browser = Browser(url)
            opened.append(browser)
            wait_until(lambda url=url: [s for s in mcp.ok("reticle_sessions")["sessions"] if s["url"] == url], 30,
                       what="a session on %s" % url)
        assert "refused" not in mcp.ok("reticle_sessions")
    finally:
        for thing in reversed(opened):
            thing.close()


# -- issue 27 #10: valid TOML in every form, line endings kept, special files skipped --------------

@pytest.mark.parametrize("text", [
    'mcp_servers = { other = { command = "x" } }\n',
    'model = "o3"\nmcp_servers = { other = { command = "x}", args = ["{", "]"] } }  # {not a brace\n\n[profile]\nx = 1\n',
    'mcp_servers = {}\n',
    'model = "o3"\nmcp_servers.other.command = "x"\n',
    '[mcp_servers]\nother.command = "x"\nlisted = { command = "y" }\n',
])
def test_init_adds_reticle_beside_codex_servers_in_inline_and_dotted_forms(tmp_path, home, text):
    project = tmp_path / "site"
    project.mkdir()
    (project / "index.html").write_text("<html><head></head><body></body></html>")
    config = home / ".codex" / "config.toml"
    config.write_text(text)
    run = _init_run(project, home, "--yes")
    assert run.returncode == 0, run.stdout + run.stderr
    new = config.read_text()
    if tomllib is not None:
        before, after = tomllib.loads(text), tomllib.loads(new)
        assert after["mcp_servers"].pop("reticle")["args"][-1] == "mcp", new
        assert after == before, new
    assert "reticle" in new and new.startswith(text.split("mcp_servers")[0]), new
    assert "nothing to change" in _init_run(project, home, "--yes").stdout


def test_init_keeps_crlf_line_endings(tmp_path, home):
    project = tmp_path / "shop"
    (project / "shop").mkdir(parents=True)
    (project / "manage.py").write_bytes(b"import django\r\n")
    settings = project / "shop" / "settings.py"
    settings.write_bytes(b'DEBUG = True\r\nMIDDLEWARE = [\r\n    "django.middleware.common.CommonMiddleware",\r\n]\r\n')
    (project / ".mcp.json").write_bytes(b'{\r\n  "mcpServers": {}\r\n}\r\n')
    (home / ".codex" / "config.toml").write_bytes(b'model = "o3"\r\n')
    run = _init_run(project, home, "--yes")
    assert run.returncode == 0, run.stdout + run.stderr
    for path in (settings, project / ".mcp.json", home / ".codex" / "config.toml"):
        data = path.read_bytes()
        assert b"reticle" in data and data.count(b"\n") == data.count(b"\r\n"), (path, data)
    assert settings.read_bytes().startswith(b'DEBUG = True\r\nMIDDLEWARE = [\r\n')


def test_init_skips_a_fifo_or_special_file_naming_it_and_never_hangs(tmp_path, home):
    project = tmp_path / "shop"
    (project / "shop").mkdir(parents=True)
    (project / "manage.py").write_text("import django\n")
    os.mkfifo(str(project / "shop" / "settings.py"))
    os.mkfifo(str(project / ".mcp.json"))
    (home / ".codex" / "config.toml").unlink()
    os.mkfifo(str(home / ".codex" / "config.toml"))
    run = _init_run(project, home, "--yes")  # 60 s timeout: a blocking open would hang here
    assert run.returncode == 0, run.stdout + run.stderr
    for path in (project / "shop" / "settings.py", project / ".mcp.json", home / ".codex" / "config.toml"):
        assert "%s is a FIFO, not a regular file; skipped" % path in run.stdout, run.stdout
    assert (project / ".cursor" / "mcp.json").is_file()  # the rest is done


def test_the_readmes_node_recipe_is_the_one_init_prints(tmp_path, home):
    """Every NODE_OPTIONS the README shows, and the npm packages beside it, are what `reticle init`
    prints for a Node project today (the README said --require after init moved to the loader hook)."""
    with open(os.path.join(os.path.dirname(RETICLE_PY), "README.md"), encoding="utf-8") as fh:
        readme = " ".join(fh.read().split())
    project = tmp_path / "api"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "api", "dependencies": {"express": "4.21.2"}}))
    out = " ".join(_init(project, home, "--dry-run", "--port", "4400").split())
    printed = re.findall(r'NODE_OPTIONS="([^"]+)"', out)
    assert len(printed) == 1, out
    shown = re.findall(r'NODE_OPTIONS="([^"]+)"', readme)
    assert len(shown) >= 2 and set(shown) == set(printed), (shown, printed)
    packages = re.search(r"npm install --save-dev ((?:@?[\w./-]+ ?)+)", out).group(1).split()
    for where in re.finditer(r"npm install --save-dev ((?:`?@opentelemetry[\w./-]+`? ?)+)", readme):
        assert where.group(1).replace("`", "").split() == packages, where.group(0)


@pytest.mark.parametrize("deps,files,says,never", [
    ({"hono": "4.6.0"}, {}, ["Hono app (hono in package.json)"], ["app: unknown", "no package.json"]),
    ({"astro": "5.1.0"}, {}, ["Astro app", "src/layouts"], ["app: unknown", "no package.json"]),
    ({}, {"app.py": "from litestar import Litestar, get\n\napp = Litestar([])\n"},
     ["Litestar server truth", "app = reticle.asgi(app)"], ["plain HTML"]),
    ({"@react-router/dev": "7.6.3"}, {"app/root.jsx": "export function Layout() {}\n"},
     ["app/root.jsx, inside <head>"], ["app/root.tsx"]),
    ({"left-pad": "1.3.0"}, {}, ["Node app (package.json)"], ["app: unknown"]),
])
def test_init_names_the_stacks_it_used_to_call_unknown(tmp_path, home, deps, files, says, never):
    """A Hono or Astro folder (a package.json, no index.html) is named, not 'unknown (no package.json)';
    a Litestar app is an ASGI app that reticle.asgi wraps, not 'plain HTML'; React Router's root file is
    the one the app has."""
    project = tmp_path / "app"
    project.mkdir()
    if deps or not files:
        (project / "package.json").write_text(json.dumps({"name": "app", "dependencies": deps}))
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    (project / "index.html").write_text("<!doctype html><html><head><title>x</title></head><body></body></html>") \
        if "app.py" in files else None
    out = " ".join(_init(project, home, "--dry-run").split())
    for word in says:
        assert word in out, (word, out)
    for word in never:
        assert word not in out, (word, out)


# Layouts as the stacks' own starters write them (create-hono, create-astro, sv create, create-react-router's
# JavaScript template, a Litestar project), trimmed to the files init reads.
def _pkg(deps=None, dev=None):
    return json.dumps({"name": "app", "private": True, "type": "module", "dependencies": deps or {},
                       "devDependencies": dev or {}})


_HONO_NODE = {"package.json": _pkg({"@hono/node-server": "^1.14.1", "hono": "^4.7.7"},
                                   {"@types/node": "^20.11.17", "tsx": "^4.7.1", "typescript": "^5.8.3"}),
              "tsconfig.json": "{}",
              "src/index.ts": "import { serve } from '@hono/node-server'\nimport { Hono } from 'hono'\n"
                              "const app = new Hono()\nserve({ fetch: app.fetch, port: 3000 })\n"}
_HONO_VITE = {"package.json": _pkg({"hono": "^4.7.7"}, {"@hono/vite-build": "^1.2.0", "@hono/vite-dev-server": "^0.18.2",
                                                       "vite": "^6.1.1", "wrangler": "^4.4.0"}),
              "vite.config.ts": "import devServer from '@hono/vite-dev-server'\n"
                                "export default { plugins: [devServer({ entry: 'src/index.tsx' })] }\n",
              "src/index.tsx": "import { Hono } from 'hono'\nimport { renderer } from './renderer'\n",
              "src/renderer.tsx": "import { jsxRenderer } from 'hono/jsx-renderer'\n"}
_ASTRO = {"package.json": _pkg({"astro": "^5.7.4"}),
          "astro.config.mjs": "// @ts-check\nimport { defineConfig } from 'astro/config';\n"
                              "export default defineConfig({});\n",
          "src/layouts/Layout.astro": "---\n---\n<html lang=\"en\">\n\t<head>\n\t\t<title>Astro</title>\n\t</head>\n"
                                      "\t<body><slot /></body>\n</html>\n",
          "src/pages/index.astro": "---\nimport Layout from '../layouts/Layout.astro';\n---\n<Layout>hi</Layout>\n"}
_SVELTEKIT = {"package.json": _pkg(dev={"@sveltejs/adapter-auto": "^6.0.0", "@sveltejs/kit": "^2.16.0",
                                        "@sveltejs/vite-plugin-svelte": "^5.0.0", "svelte": "^5.0.0", "vite": "^6.2.6"}),
              "vite.config.js": "import { sveltekit } from '@sveltejs/kit/vite';\n"
                                "export default { plugins: [sveltekit()] };\n",
              "src/app.html": "<!doctype html>\n<html>\n<head>\n%sveltekit.head%\n</head>\n"
                              "<body>%sveltekit.body%</body>\n</html>\n"}
_LITESTAR = "from litestar import Litestar, get\n\n\n@get('/')\nasync def index() -> str:\n    return 'hi'\n\n\n" \
            "app = Litestar([index])\n"
_RR7_JS = {"package.json": _pkg({"@react-router/node": "^7.5.3", "@react-router/serve": "^7.5.3", "react": "^19.1.0",
                                 "react-dom": "^19.1.0", "react-router": "^7.5.3"},
                                {"@react-router/dev": "^7.5.3", "vite": "^6.3.3"}),
           "vite.config.js": "import { reactRouter } from '@react-router/dev/vite';\n"
                             "export default { plugins: [reactRouter()] };\n"}


@pytest.mark.parametrize("files, says, never", [
    (_HONO_NODE, ["app: Hono (hono in package.json)", "the <head> of the layout your routes render",
                  "{process.env.NODE_ENV !== 'production' && <script src=\"http://127.0.0.1:4400/reticle.js\">",
                  "Hono server truth from OpenTelemetry", "--experimental-loader"],
     ["app: unknown", "Node server truth", "dev HTML entry"]),
    (_HONO_VITE, ["app: Hono (hono in package.json)", "{import.meta.env.DEV && <script src="],
     ["app: Vite", "document.createElement"]),
    (_ASTRO, ["app: Astro (astro in package.json)", "add this to src/layouts/Layout.astro, inside <head>",
              "{import.meta.env.DEV && <script is:inline src=\"http://127.0.0.1:4400/reticle.js\"></script>}",
              "Astro server truth from OpenTelemetry"], ["app: unknown", "location.hostname"]),
    (dict(_ASTRO, **{"package.json": _pkg({"astro": "^5.7.4", "@astrojs/node": "^9.2.1"}, {"vite": "^6.3.3"})}),
     ["app: Astro (astro in package.json)"], ["app: Vite"]),
    (_SVELTEKIT, ["app: SvelteKit (@sveltejs/kit in package.json)", "add this to src/app.html, before %sveltekit.head%",
                  "SvelteKit server truth"], ["app: Vite", "import.meta.env.DEV"]),
    ({"pyproject.toml": "[project]\nname = \"notes\"\ndependencies = [\n  \"litestar[standard]>=2.12\",\n  \"jinja2\",\n]\n",
      "src/app/__init__.py": "", "src/app/asgi.py": _LITESTAR},
     ["app: Litestar (litestar imported in src/app/asgi.py)", "Litestar server truth: in src/app/asgi.py",
      "`app = reticle.asgi(app)`", "`uvicorn app.asgi:app --app-dir src --reload`",
      "with reticle.asgi(app, inject=True)"], ["app: unknown", "plain HTML"]),
    ({"requirements.txt": "litestar==2.15.1\nuvicorn\n", "server.py": _LITESTAR,
      "index.html": "<!doctype html><html><head><title>x</title></head><body></body></html>"},
     ["app: Litestar (litestar imported in server.py)", "`uvicorn server:app --reload`"], ["plain HTML"]),
    ({"pyproject.toml": "[project]\nname = \"notes\"\ndependencies = [\"litestar[standard]>=2.12\", \"litestar-granian\"]\n",
      "services/api/v1/handlers/app.py": _LITESTAR},  # deeper than init reads: the dependency names it
     ["app: Litestar (litestar in pyproject.toml)", "Litestar server truth: in your app module"], ["app: unknown"]),
    (dict(_RR7_JS, **{"react-router.config.js": "export default { appDirectory: \"src\", ssr: true };\n",
                      "src/root.jsx": "export function Layout({ children }) { return children }\n"}),
     ["add this to src/root.jsx, inside <head> of its Layout"], ["app/root"]),
    (dict(_RR7_JS, **{"react-router.config.js": "export default { ssr: true };\n", "jsconfig.json": "{}"}),
     ["add this to app/root.jsx, inside <head>"], ["root.tsx"]),
    ({"package.json": _pkg(dev={"vite": "^6.3.3"}), "backend/main.py": "from fastapi import FastAPI\n\napp = FastAPI()\n",
      "index.html": "<!doctype html><html><head><title>x</title></head><body></body></html>"},
     ["app: Vite (vite in package.json); HTML entry index.html", "would change index.html",
      "FastAPI server truth: in backend/main.py"], ["Vite server truth"]),
    ({"package.json": _pkg({"nuxt": "^3.17.0", "vue": "^3.5.13"}), "nuxt.config.ts": "export default defineNuxtConfig({})\n"},
     ["app: Nuxt", "$development: { app: { head: { script: [{ src: \"http://127.0.0.1:4400/reticle.js\" }] } } }"],
     ["location.hostname"]),
], ids=["hono-node", "hono-vite", "astro", "astro-with-vite", "sveltekit", "litestar-src-layout", "litestar-server-py",
        "litestar-declared", "react-router-appdirectory", "react-router-no-root-yet", "vite-with-fastapi", "nuxt"])
def test_init_names_each_stack_from_its_starters_layout_and_says_where_the_tag_goes(tmp_path, home, files, says,
                                                                                      never):
    """A framework that renders its own documents is named before the vite it runs on (SvelteKit, Astro, a
    Hono app on @hono/vite-dev-server), with the tag in its own dev-only form and the file it goes into;
    a Litestar app is found by the module that imports it, anywhere in the project, or by its dependency
    files, and gets the ASGI wrap with the server that serves the wrapped app; React Router's root file is
    looked for in the app directory its config names; a Vite page with a Python API beside it gets both."""
    project = tmp_path / "app"
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    out = " ".join(_init(project, home, "--dry-run").split())
    for word in says:
        assert word in out, (word, out)
    for word in never:
        assert word not in out, (word, out)


# -- storage truth: init finds the app's store and writes the watch into the MCP configuration -----

_CONFIGS = ((".mcp.json", "mcpServers"), (".cursor/mcp.json", "mcpServers"), (".vscode/mcp.json", "servers"))


def _watch(project):
    """The RETICLE_WATCH_DB the three project configurations give the daemon (the same in each), or None."""
    values = {json.dumps(_server(project / path, key).get("env", {}).get("RETICLE_WATCH_DB")) for path, key in _CONFIGS}
    assert len(values) == 1, values
    return json.loads(values.pop())


def _sqlite(path):
    return "sqlite:///%s" % path  # an absolute path: four slashes


def _make_sqlite(path):
    import sqlite3
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(str(path)) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()


DJANGO_SETTINGS = {
    "pathlib": ("from pathlib import Path\n\nBASE_DIR = Path(__file__).resolve().parent.parent\n",
                "BASE_DIR / 'db.sqlite3'"),
    "os.path": ("import os\n\nBASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n",
                "os.path.join(BASE_DIR, 'db.sqlite3')"),
}


@pytest.mark.parametrize("style", sorted(DJANGO_SETTINGS))
def test_django_settings_sqlite_name_is_resolved_from_base_dir(tmp_path, home, style):
    """Django's template settings (`BASE_DIR / 'db.sqlite3'`, or the older os.path.join form) give the
    database beside manage.py, read with ast: the settings are never run."""
    project = tmp_path / "site"
    (project / "mysite").mkdir(parents=True)
    (project / "manage.py").write_text("import django\n")
    head, name = DJANGO_SETTINGS[style]
    (project / "mysite" / "settings.py").write_text(
        head + "DEBUG = True\nMIDDLEWARE = []\nraise SystemExit('settings must not run')\n"
        "DATABASES = {\n    'default': {\n        'ENGINE': 'django.db.backends.sqlite3',\n"
        "        'NAME': %s,\n    }\n}\n" % name)
    out = _init(project, home, "--yes")
    url = _sqlite(project / "db.sqlite3")
    assert "store: %s (Django mysite/settings.py DATABASES['default'])" % url in out, out
    assert _watch(project) == url


def test_django_postgresql_literals_make_a_url_and_environment_values_are_named_unread(tmp_path, home):
    project = tmp_path / "shop"
    (project / "shop").mkdir(parents=True)
    (project / "manage.py").write_text("import django\n")
    (project / "shop" / "settings.py").write_text(
        "import os\nDATABASES = {\n"
        "    'default': {'ENGINE': 'django.db.backends.postgresql', 'NAME': 'shop', 'USER': 'shop',\n"
        "                'PASSWORD': 'pw', 'HOST': 'localhost', 'PORT': 5432},\n"
        "    'replica': {'ENGINE': 'django.db.backends.postgresql', 'NAME': os.environ['REPLICA_DB']},\n"
        "}\n")
    out = _init(project, home, "--yes")
    assert "store: postgresql://shop:***@localhost:5432/shop (Django shop/settings.py DATABASES['default'])" in out
    assert "DATABASES['replica']: could not read its NAME: NAME: it is read from the environment" in out, out
    assert _watch(project) == "postgresql://shop:pw@localhost:5432/shop"


def test_rails_database_yml_development_merges_the_default_block(tmp_path, home):
    project = tmp_path / "blog"
    (project / "config").mkdir(parents=True)
    (project / "config" / "database.yml").write_text(
        "# SQLite. Versions 3.8.0 and up are supported.\n"
        "default: &default\n  adapter: sqlite3\n  pool: <%= ENV.fetch(\"RAILS_MAX_THREADS\") { 5 } %>\n"
        "  timeout: 5000\n\n"
        "development:\n  <<: *default\n  database: db/development.sqlite3\n\n"
        "test:\n  <<: *default\n  database: db/test.sqlite3\n\n"
        "production:\n  <<: *default\n  database: <%= ENV[\"DATABASE_PATH\"] %>\n")
    out = _init(project, home, "--yes")
    url = _sqlite(project / "db" / "development.sqlite3")
    assert "store: %s (Rails config/database.yml development); not there yet" % url in out, out
    assert _watch(project) == url


@pytest.mark.parametrize("env, expected", [
    ("APP_NAME=Laravel\nDB_CONNECTION=sqlite\n# DB_DATABASE=laravel\n", "sqlite"),
    ("DB_CONNECTION=pgsql\nDB_HOST=127.0.0.1\nDB_PORT=5432\nDB_DATABASE=notes\nDB_USERNAME=sail\n"
     "DB_PASSWORD=\"s3cret\"\n", "postgresql://sail:s3cret@127.0.0.1:5432/notes"),
])
def test_laravel_env_db_connection_names_the_store(tmp_path, home, env, expected):
    """Laravel's .env: sqlite with the default database/database.sqlite, or pgsql from its DB_ variables."""
    project = tmp_path / "notes"
    project.mkdir()
    (project / "artisan").write_text("#!/usr/bin/env php\n")
    (project / ".env").write_text(env)
    if expected == "sqlite":
        expected = _sqlite(project / "database" / "database.sqlite")
        _make_sqlite(project / "database" / "database.sqlite")
    out = _init(project, home, "--yes")
    assert "Laravel .env DB_CONNECTION=" in out and "s3cret" not in out, out
    assert _watch(project) == expected


def test_prisma_sqlite_file_url_is_relative_to_the_schema_folder(tmp_path, home):
    project = tmp_path / "app"
    (project / "prisma").mkdir(parents=True)
    (project / "package.json").write_text(json.dumps({"dependencies": {"@prisma/client": "5.22.0"}}))
    (project / "prisma" / "schema.prisma").write_text(
        'generator client {\n  provider = "prisma-client-js"\n}\n\n// the dev database\n'
        'datasource db {\n  provider = "sqlite"\n  url      = "file:./dev.db"\n}\n')
    out = _init(project, home, "--yes")
    url = _sqlite(project / "prisma" / "dev.db")
    assert "store: %s (Prisma prisma/schema.prisma datasource db)" % url in out, out
    assert _watch(project) == url


def test_env_database_url_password_is_printed_masked_and_written_real(tmp_path, home):
    """A .env DATABASE_URL with a password: every line init prints (the dry run's new lines too) shows
    ***, the project's configurations hold the real URL and say so, and Codex's (the user's, read for every
    project) gets no watch."""
    project = tmp_path / "api"
    project.mkdir()
    (project / "index.html").write_text("<html><head></head><body></body></html>")
    (project / ".env").write_text("# local only\nDATABASE_URL='postgresql://app:hunter2@localhost:5432/app'\n")
    dry = _init(project, home, "--dry-run")
    assert "store: postgresql://app:***@localhost:5432/app (.env DATABASE_URL)" in dry, dry
    assert '"RETICLE_WATCH_DB": "postgresql://app:***@localhost:5432/app"' in dry and "hunter2" not in dry, dry
    out = _init(project, home, "--yes")
    assert "hunter2" not in out and "holds the database password" in out, out
    assert _watch(project) == "postgresql://app:hunter2@localhost:5432/app"
    assert "RETICLE_WATCH_DB" not in (home / ".codex" / "config.toml").read_text()
    assert "reticle_watch_db" in out


def test_a_better_sqlite3_database_named_in_server_js_is_found(tmp_path, home):
    project = tmp_path / "notes"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"dependencies": {"express": "4.21.2",
                                                                       "better-sqlite3": "11.7.0"}}))
    (project / "server.js").write_text("const Database = require('better-sqlite3');\n"
                                       "const db = new Database('notes.db');\nconst scratch = new Database(':memory:');\n")
    (project / "node_modules" / "x").mkdir(parents=True)
    (project / "node_modules" / "x" / "index.js").write_text("new Database('vendored.db')\n")
    out = _init(project, home, "--yes")
    url = _sqlite(project / "notes.db")
    assert "store: %s (server.js: new Database('notes.db'))" % url in out, out
    assert _watch(project) == url


def test_a_flask_instance_sqlite_file_is_found(tmp_path, home):
    project = tmp_path / "flaskr"
    project.mkdir()
    (project / "app.py").write_text("from flask import Flask\napp = Flask(__name__)\n")
    _make_sqlite(project / "instance" / "app.sqlite")
    (project / "instance" / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0 not a SQLite file")
    out = _init(project, home, "--yes")
    url = _sqlite(project / "instance" / "app.sqlite")
    assert "store: %s (a SQLite file beside the app (instance/app.sqlite))" % url in out, out
    assert _watch(project) == url


@pytest.mark.parametrize("files, says", [
    ({}, "store: no database found: if the app has one, add RETICLE_WATCH_DB="),
    ({".env": "DATABASE_URL=mysql://root:pw@localhost/app\n"},
     "store: .env DATABASE_URL: a MySQL database (mysql:): found, but Reticle cannot watch MySQL yet"),
])
def test_no_watchable_store_says_so_and_writes_no_watch(tmp_path, home, files, says):
    project = tmp_path / "site"
    project.mkdir()
    (project / "index.html").write_text("<html><head></head><body></body></html>")
    for name, text in files.items():
        (project / name).write_text(text)
    out = _init(project, home, "--yes")
    assert says in out and "reticle_watch_db" in out and "pw@" not in out, out
    assert _watch(project) is None
    for path, key in _CONFIGS:
        assert "env" not in _server(project / path, key)


def test_several_stores_are_watched_together_once_and_an_existing_entry_gets_the_watch(tmp_path, home):
    """Stores from several sources share one RETICLE_WATCH_DB, separated by a space, each once; an
    existing `reticle` entry gets the watch added beside its own keys; a second run changes nothing."""
    project = tmp_path / "shop"
    (project / "shop").mkdir(parents=True)
    (project / "manage.py").write_text("import django\n")
    (project / "shop" / "settings.py").write_text(
        "from pathlib import Path\nBASE_DIR = Path(__file__).resolve().parent.parent\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': BASE_DIR / 'db.sqlite3'}}\n")
    (project / ".env").write_text("DATABASE_URL=sqlite:///db.sqlite3\n")  # the same file, named twice
    (project / ".env.local").write_text("DATABASE_URL=postgres://shop@localhost/shop\n")
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"reticle": {
        "command": "reticle", "args": ["mcp"], "env": {"RETICLE_PORT": "4400"}}}}))
    out = _init(project, home, "--yes")
    both = "%s postgres://shop@localhost/shop" % _sqlite(project / "db.sqlite3")
    assert "added RETICLE_WATCH_DB to the 'reticle' MCP server's env" in out, out
    claude = json.loads((project / ".mcp.json").read_text())["mcpServers"]["reticle"]
    assert claude == {"command": "reticle", "args": ["mcp"],
                      "env": {"RETICLE_PORT": "4400", "RETICLE_WATCH_DB": both}}, claude
    assert _watch(project) == both
    assert "nothing to change" in _init(project, home, "--yes")
