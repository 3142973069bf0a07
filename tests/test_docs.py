"""The README documents every tool, command, flag and environment variable, and
``__all__`` is the module's public surface (the sqlite-utils style).

The rule for ``__all__``: a *public name* is a class or a function defined in
``reticle.py`` itself (its ``__module__`` is the module's own name) whose name
does not start with ``_``.  Imported modules and names, constants and
underscored helpers are not public names.  ``__all__`` must list exactly the
public names: a class that is not meant for users gets a leading underscore,
and one that is gets listed.
"""

import argparse
import inspect
import os
import re

import pytest
from tornado.testing import AsyncHTTPTestCase
from tornado.testing import gen_test

import reticle

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")


@pytest.fixture(scope="module")
def readme():
    with open(README, encoding="utf-8") as fh:
        return fh.read()


def subcommands():
    """{command: [its flags]} from the argparse parser itself, plus the top-level flags."""
    parser = reticle._build_parser()
    out = {"": [o for a in parser._actions if not isinstance(a, argparse._SubParsersAction)
                for o in a.option_strings if o.startswith("--") and o != "--help"]}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = [o for a in sub._actions for o in a.option_strings
                             if o.startswith("--") and o != "--help"]
    return out


def public_names(module):
    return sorted(name for name, obj in vars(module).items()
                  if not name.startswith("_")
                  and (inspect.isclass(obj) or inspect.isfunction(obj))
                  and getattr(obj, "__module__", None) == module.__name__)


def env_variables():
    with open(reticle.__file__, encoding="utf-8") as fh:
        source = fh.read()
    return sorted(set(re.findall(r"""["'](RETICLE_[A-Z_]+)["']""", source)))


@pytest.mark.parametrize("tool", reticle._build_registry().names())
def test_every_tool_is_in_the_readme(readme, tool):
    assert "`%s`" % tool in readme


@pytest.mark.parametrize("uri", ["reticle://docs/usage", "reticle://docs/cheatsheet", "reticle://predicates",
                                 "reticle://sessions"])
def test_every_resource_is_in_the_readme(readme, uri):
    assert uri in readme


@pytest.mark.parametrize("command,flags", sorted(subcommands().items()))
def test_every_command_and_flag_is_in_the_readme(readme, command, flags):
    if not command:
        for flag in flags:
            assert "reticle %s" % flag in readme
        return
    lines = [line for line in readme.splitlines() if re.search(r"\breticle %s\b" % re.escape(command), line)]
    assert lines, "no line of README.md shows `reticle %s`" % command
    documented = "\n".join(lines)
    for flag in flags:
        assert flag in documented, "reticle %s %s is not documented beside the command" % (command, flag)


def test_the_parser_has_the_commands_of_issue_2():
    assert {"serve", "mcp", "status", "stop", "token"} <= set(subcommands())


@pytest.mark.parametrize("name", env_variables())
def test_every_environment_variable_is_in_the_readme(readme, name):
    assert "`%s`" % name in readme


def test_all_names_exist():
    for name in reticle.__all__:
        assert hasattr(reticle, name), name


def test_all_has_no_duplicates():
    assert len(reticle.__all__) == len(set(reticle.__all__))


def test_all_matches_the_public_names():
    public = public_names(reticle) + ["__version__"]
    missing = sorted(set(public) - set(reticle.__all__))
    not_public = sorted(set(reticle.__all__) - set(public))
    assert not missing and not not_public, (
        "public names missing from __all__: %s; names in __all__ that are not public: %s"
        % (missing, not_public))


def test_all_is_the_chosen_api():
    """The API a vendoring user may rely on, chosen on purpose and short (STYLE 29)."""
    assert sorted(reticle.__all__) == sorted([
        "make_app", "Hub", "main", "parse_predicate", "__version__",
        "ReticleError", "ToolError", "RpcError", "ConfigError", "PredicateError",
        "wsgi", "asgi", "DjangoMiddleware", "watch_sqlalchemy", "watch_sqlite3"])


def test_every_api_name_is_in_the_readme(readme):
    for name in reticle.__all__:
        assert re.search(r"`%s[`(]" % re.escape(name), readme), "%s is in __all__ but the README's API list does not name it" % name


def test_version_is_a_string():
    assert re.fullmatch(r"\d+\.\d+\.\d+([a-z0-9.+-]*)", reticle.__version__)


class SdkVersionTest(AsyncHTTPTestCase):
    def setUp(self):
        import tempfile

        self.state_dir = tempfile.TemporaryDirectory(prefix="reticle-docs-")
        super().setUp()

    def tearDown(self):
        super().tearDown()
        self.state_dir.cleanup()

    def get_app(self):
        return reticle.make_app(reticle.Hub(state_dir=self.state_dir.name))

    @gen_test
    async def test_served_sdk_has_the_version_on_its_first_line(self):
        resp = await self.http_client.fetch(self.get_url("/reticle.js"), raise_error=False)
        self.assertEqual(resp.code, 200)
        self.assertTrue(resp.headers["Content-Type"].startswith("application/javascript"))
        first_line = resp.body.decode("utf-8").splitlines()[0]
        self.assertIn(reticle.__version__, first_line)
        self.assertNotIn("__RETICLE_VERSION__", resp.body.decode("utf-8"))


def _slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation but hyphens and underscores gone,
    spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_first_screen_fits_in_150_lines_and_its_contents_reach_every_reference_section(readme):
    """What Reticle is, the two commands, connecting an app and an agent and a first verification come
    before line 150, then the contents; each link of the contents names a heading that exists, and every
    reference heading after it is linked."""
    lines = readme.splitlines()
    first = "\n".join(lines[:150])
    for heading in ("## Two commands for a fresh machine", "## Connect an app and an agent",
                    "## A first verification", "## Contents"):
        assert "\n%s\n" % heading in first, heading
    assert "python3 -m pip install . && python3 -m reticle demo" in first
    assert "sh tests/bootstrap.sh && python3 -m pytest" in first
    contents = readme.index("\n## Contents\n")
    after = readme[contents:].split("\n## ", 2)[1]
    links = re.findall(r"\]\(#([^)]+)\)", after)
    anchors = [_slug(h) for h in re.findall(r"^#{2,3} (.+)$", readme, re.MULTILINE)]
    assert links and set(links) <= set(anchors), set(links) - set(anchors)
    reference = readme[contents:].split("\n## ", 2)[2]
    for heading in re.findall(r"^#{2,3} (.+)$", "## " + reference, re.MULTILINE):
        assert _slug(heading) in links, "the contents do not link %r" % heading


def test_ci_runs_the_readmes_test_command_as_written(readme):
    """.ci/run calls the README's test command itself, so the two cannot drift (it makes its .venv
    anew first)."""
    command = re.search(r"Run the whole test suite.*?```sh\n(.+?)\n```", readme, re.DOTALL).group(1)
    assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && "), command
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as fh:
        assert command in fh.read().splitlines()


def test_reading_the_code_names_every_module_and_where_its_tests_are():
    """The README's 'Reading the code' names each module of src/reticle/ once in its table of tests, and
    each test file it names exists: the tests of a module are found from its name."""
    with open(README, encoding="utf-8") as fh:
        section = fh.read().split("### Reading the code", 1)[1]
    table = section.split("| modules | their tests (under `tests/`) |", 1)[1].split("\n\n", 1)[0]
    named, tests = [], set()
    for row in table.strip().splitlines()[1:]:
        modules, files = row.strip("|").split("|")
        named += re.findall(r"`(\w+)`", modules)
        tests |= set(re.findall(r"`(test_\w+\.py)`", files))
    package = os.path.join(REPO, "src", "reticle")
    modules = sorted(n[:-3] for n in os.listdir(package) if n.endswith(".py"))
    assert sorted(named) == modules, set(named) ^ set(modules)
    missing = [t for t in sorted(tests) if not os.path.exists(os.path.join(REPO, "tests", t))]
    assert tests and missing == [], missing
