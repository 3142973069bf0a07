"""The house with doors (STYLE 15a): reticle.py is the build of the package src/reticle/ by
tools/amalgamate.py, the build refuses what would change meaning once the modules are joined, and a
built line can be traced back to its module (or script) line.

Each refusal is checked on a copy of the tree in a temporary directory, with one thing broken."""
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import reticle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _amalgamate(*args, root=ROOT):
    return subprocess.run([sys.executable, os.path.join(root, "tools", "amalgamate.py")] + list(args),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path):
    """A copy of what the build reads and writes: tools/amalgamate.py, src/, LICENSE, reticle.py."""
    work = tmp_path / "tree"
    (work / "tools").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "tools", "amalgamate.py"), str(work / "tools" / "amalgamate.py"))
    shutil.copytree(os.path.join(ROOT, "src"), str(work / "src"))
    for name in ("LICENSE", "reticle.py"):
        shutil.copy(os.path.join(ROOT, name), str(work / name))
    return work


def _edit(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_committed_module_is_the_build_of_src():
    done = _amalgamate("--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reticle.py is the build of src/" in done.stdout


def _modules():
    folder = os.path.join(ROOT, "src", "reticle")
    return sorted(n[:-3] for n in os.listdir(folder) if n.endswith(".py"))


def _sibling_imports(name, type_checking=False):
    """The modules of the package that src/reticle/<name>.py imports (at run time, or under TYPE_CHECKING)."""
    with open(os.path.join(ROOT, "src", "reticle", name + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and getattr(stmt.test, "id", None) == "TYPE_CHECKING":
            if type_checking:
                found |= {s.module for s in stmt.body if isinstance(s, ast.ImportFrom) and s.level}
        elif isinstance(stmt, ast.ImportFrom) and stmt.level:
            found.add(stmt.module)
    return found


def test_the_built_file_says_it_is_built_and_marks_each_module_after_what_it_imports():
    with open(os.path.join(ROOT, "reticle.py"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("#!/usr/bin/env python3\n# MIT License\n")
    assert "This file is BUILT: tools/amalgamate.py" in text.split('"""', 1)[0]
    begins = re.findall(r"^#: begin src/reticle/(\S+)\.py$", text, re.M)
    ends = re.findall(r"^#: end src/reticle/(\S+)\.py$", text, re.M)
    assert begins == ends and sorted(begins) == [m for m in _modules() if m != "__init__"]
    assert begins[-1] == "__main__"
    for at, name in enumerate(begins):
        later = set(begins[at + 1:])
        assert not _sibling_imports(name) & later, (name, _sibling_imports(name) & later)
    assert not re.search(r"^\w+ = r\"\"\"#include ", text, re.M) and "@python" not in text
    assert not re.search(r"^from \.", text, re.M), "no import between modules is left in the built file"


def test_the_package_imports_on_its_own_with_the_built_files_public_surface():
    """src/ is a real package: an editor, mypy or `python -m` imports it as it stands, and it hands on
    what the built module offers."""
    code = ("import sys; sys.path.insert(0, 'src'); import reticle; "
            "assert reticle.__file__.endswith('__init__.py'), reticle.__file__; "
            "print(sorted(reticle.__all__)); print(reticle.make_app.__module__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed, home = done.stdout.split("\n")[:2]
    assert listed == str(sorted(reticle.__all__))
    assert home == "reticle.app"
    for name in reticle.__all__:
        assert hasattr(reticle, name), name


def test_a_hand_edit_of_the_built_file_fails_the_check(tree):
    _edit(tree / "reticle.py", "DEFAULT_PORT = 4400", "DEFAULT_PORT = 4401")
    done = _amalgamate("--check", root=str(tree))
    assert done.returncode == 1
    assert "reticle.py is not the build of src/" in done.stderr and "DEFAULT_PORT = 4401" in done.stderr


def test_an_edited_module_is_built_in(tree):
    module = tree / "src" / "reticle" / "constants.py"
    _edit(module, "DEFAULT_PORT = 4400", "DEFAULT_PORT = 4402")
    assert _amalgamate("--check", root=str(tree)).returncode == 1
    done = _amalgamate(root=str(tree))
    assert done.returncode == 0, done.stderr
    assert "DEFAULT_PORT = 4402" in (tree / "reticle.py").read_text(encoding="utf-8")
    assert _amalgamate("--check", root=str(tree)).returncode == 0


def _refused(tree, *needles):
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1, done.stdout
    for needle in needles:
        assert re.search(needle, done.stderr), done.stderr
    with open(os.path.join(ROOT, "reticle.py"), encoding="utf-8") as f:
        assert (tree / "reticle.py").read_text(encoding="utf-8") == f.read(), "nothing written"


ERRORS_TOP = "class ReticleError(Exception):"


def test_an_import_cycle_is_refused(tree):
    """errors.py stands on the ground floor; importing the app from it closes a loop."""
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP,
          "from .app import make_app\n\n\ndef _late():\n    return make_app\n\n\n" + ERRORS_TOP)
    _refused(tree, r"import cycle: .*errors -> app.*|import cycle: .*app -> .*errors")


def test_a_cycle_through_type_checking_imports_is_refused_too(tree):
    """A TYPE_CHECKING import runs for the type checker only, but it is still a door from one module to
    another: the house stays layered for a reader and an editor as well."""
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP,
          "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .hub import Hub\n\n\n"
          "def _late(hub: Hub) -> None:\n    pass\n\n\n" + ERRORS_TOP)
    _refused(tree, r"import cycle: ")


def test_a_name_used_without_its_import_is_refused(tree):
    """Joined, one namespace would lend the module the name; as a package it would fail: refused."""
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP,
          "def _late():\n    return make_app\n\n\n" + ERRORS_TOP)
    _refused(tree, r"src/reticle/errors\.py:\d+ uses make_app without importing it \(from \.app import make_app\)")


def test_a_library_name_used_without_its_import_is_refused(tree):
    """Joined, another module's `import json` would lend it; as a package the module would fail."""
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP,
          "def _late(x):\n    return json.dumps(x)\n\n\n" + ERRORS_TOP)
    _refused(tree, r"src/reticle/errors\.py:\d+ uses json without importing it \(import json\)")


def test_two_modules_defining_one_name_are_refused(tree):
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP, "DEFAULT_PORT = 1\n\n\n" + ERRORS_TOP)
    _refused(tree, r"src/reticle/errors\.py defines DEFAULT_PORT, which src/reticle/constants\.py defines too")


def test_an_import_of_a_name_the_module_lacks_is_refused(tree):
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP,
          "from .constants import NO_SUCH_NAME\n\nX = NO_SUCH_NAME\n\n\n" + ERRORS_TOP)
    _refused(tree, r"imports NO_SUCH_NAME from \.constants, which does not define it")


def test_import_time_side_effects_on_another_module_are_refused(tree):
    """A module that changes another's table when it is imported makes the build order decide what the
    table holds."""
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP,
          "from .constants import PROTOCOL_VERSIONS\n\nPROTOCOL_VERSIONS.append(1)\n\n\n" + ERRORS_TOP)
    _refused(tree, r"errors\.py:\d+ calls a method of PROTOCOL_VERSIONS \(from \.constants\) when it is imported")


def test_importing_a_name_its_module_rebinds_with_global_is_refused(tree):
    _edit(tree / "src" / "reticle" / "constants.py", "DEFAULT_PORT = 4400",
          "DEFAULT_PORT = 4400\n\n\ndef _move_port():\n    global DEFAULT_PORT\n    DEFAULT_PORT = 1")
    _refused(tree, r"imports DEFAULT_PORT, which src/reticle/constants\.py rebinds with `global`")


def test_an_import_from_outside_the_package_may_not_take_a_modules_name(tree):
    _edit(tree / "src" / "reticle" / "errors.py", ERRORS_TOP, "from os import sep as DEFAULT_PORT\n\n\n" + ERRORS_TOP)
    _refused(tree, r"imports DEFAULT_PORT, which src/reticle/constants\.py defines")


def test_an_included_script_may_not_break_the_raw_string(tree):
    relay = tree / "src" / "sdk" / "relay.js"
    relay.write_text(relay.read_text(encoding="utf-8") + 'var s = """;\n', encoding="utf-8")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1 and "triple quote" in done.stderr, done.stderr


def test_where_names_the_module_and_line_of_a_built_line_and_the_script_line_inside_the_sdk():
    with open(os.path.join(ROOT, "reticle.py"), encoding="utf-8") as f:
        built = f.read().split("\n")
    target = next(i for i, line in enumerate(built, 1) if line.startswith("class Hub"))
    done = _amalgamate("--where", str(target))
    assert done.returncode == 0, done.stderr
    path, line = done.stdout.strip().rsplit(":", 1)
    assert path == "src/reticle/hub.py"
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert f.read().split("\n")[int(line) - 1] == built[target - 1]
    # inside the embedded SDK, a line is named by its script and line there
    sdk_at = built.index('_SDK_JS = r"""' + reticle._SDK_JS.split("\n")[0])
    for offset in (1, 500, 4000):
        done = _amalgamate("--where", str(sdk_at + 1 + offset))
        path, line = done.stdout.strip().rsplit(":", 1)
        assert path.startswith("src/sdk/reticle/") and path.endswith(".js"), done.stdout
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            source = f.read().split("\n")[int(line) - 1]
        assert source == built[sdk_at + offset]
    # the closing quotes after thousands of built lines from one module line: the map still holds
    close_at = next(i for i in range(sdk_at, len(built)) if built[i] == '"""') + 1
    path, line = _amalgamate("--where", str(close_at)).stdout.strip().rsplit(":", 1)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert f.read().split("\n")[int(line) - 1].startswith('_SDK_JS = r"""#include '), path
    after = close_at + 3  # the next statement of the module, back on the module's own lines
    path, line = _amalgamate("--where", str(after)).stdout.strip().rsplit(":", 1)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert f.read().split("\n")[int(line) - 1] == built[after - 1]
    assert _amalgamate("--where", "999999").returncode == 2


def test_order_lists_each_module_above_what_it_imports():
    done = _amalgamate("--order")
    assert done.returncode == 0, done.stderr
    floor = {}
    for line in done.stdout.splitlines():
        level, name = line.split()[:2]
        floor[name] = int(level)
    assert set(floor) == set(_modules())
    for name in floor:
        for below in _sibling_imports(name) | _sibling_imports(name, type_checking=True):
            assert floor[below] < floor[name] or name == "__init__", (name, below)


def test_the_sdk_tables_reach_the_page_in_its_config_not_through_the_build(tmp_path):
    """Nothing of the package runs during the build: the scripts people edit are what ships, and the
    daemon sends the convention tables in the SDK's config, so both sides read one table."""
    assert "@python" not in reticle._SDK_JS
    scripts = sorted(glob.glob(os.path.join(ROOT, "src", "sdk", "reticle", "*.js")))
    joined = ""
    for path in scripts:
        with open(path, encoding="utf-8") as f:
            joined += f.read()
    assert joined == reticle._SDK_JS
    hub = reticle.Hub(state_dir=str(tmp_path / "state"))
    config = json.loads(hub.sdk_source().split("var CONFIG = ", 1)[1].split(";\n", 1)[0])
    assert config["conventions"] == reticle._sdk_conventions()
    assert [r[0] for r in config["conventions"]["failureUi"]] == [r.name for r in reticle._FAILURE_UI]


def test_a_table_marker_in_a_script_is_refused(tree):
    alerts = tree / "src" / "sdk" / "reticle" / "13_alerts.js"
    alerts.write_text(alerts.read_text(encoding="utf-8") + "var T = /*@python _fn*/ [];\n", encoding="utf-8")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1 and "takes no table from Python at build time" in done.stderr, done.stderr


def test_no_part_cites_the_tracker():
    """A vendored reticle.py travels without this repository's issues: a comment gives the reason,
    never "issue 19 #5"."""
    found = []
    for folder, _, names in os.walk(os.path.join(ROOT, "src")):
        for name in sorted(names):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if re.search(r"\bissues? \d+\b|\(#\d+\)", line, re.I):
                        found.append("%s:%d: %s" % (os.path.relpath(os.path.join(folder, name), ROOT), n, line.strip()))
    assert found == [], "\n".join(found)
