"""The house in parts (STYLE 15a): reticle.py is the build of src/ by tools/amalgamate.py, the build
refuses parts that break the reading order, and a built line can be traced back to its part.

Each refusal is checked on a copy of the tree in a temporary directory, with one thing broken."""
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


def test_the_built_file_says_it_is_built_and_marks_each_part():
    with open(os.path.join(ROOT, "reticle.py"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("#!/usr/bin/env python3\n# MIT License\n")
    assert "This file is BUILT: tools/amalgamate.py" in text.split('"""', 1)[0]
    parts = sorted(n for n in os.listdir(os.path.join(ROOT, "src", "reticle")) if n.endswith(".py"))
    begins = re.findall(r"^#: begin (src/reticle/\S+)$", text, re.M)
    ends = re.findall(r"^#: end (src/reticle/\S+)$", text, re.M)
    assert begins == ends == ["src/reticle/" + n for n in parts]
    assert "#include" not in text and "@python" not in text


def test_a_hand_edit_of_the_built_file_fails_the_check(tree):
    _edit(tree / "reticle.py", "DEFAULT_PORT = 4400", "DEFAULT_PORT = 4401")
    done = _amalgamate("--check", root=str(tree))
    assert done.returncode == 1
    assert "reticle.py is not the build of src/" in done.stderr and "DEFAULT_PORT = 4401" in done.stderr


def test_an_edited_part_is_built_in(tree):
    part = next((tree / "src" / "reticle").glob("*_constants.py"))
    _edit(part, "DEFAULT_PORT = 4400", "DEFAULT_PORT = 4402")
    assert _amalgamate("--check", root=str(tree)).returncode == 1
    done = _amalgamate(root=str(tree))
    assert done.returncode == 0, done.stderr
    assert "DEFAULT_PORT = 4402" in (tree / "reticle.py").read_text(encoding="utf-8")
    assert _amalgamate("--check", root=str(tree)).returncode == 0


def test_a_name_a_later_part_defines_is_refused_where_it_runs_at_import(tree):
    """A part's module-level code reads a name that only a later part defines (STYLE 5: defined before
    it is used at import time): the build names the part, line, name and the part that defines it, and
    writes nothing."""
    part = next((tree / "src" / "reticle").glob("*_errors.py"))
    _edit(part, "class ReticleError(Exception):", "_EARLY = make_app\n\n\nclass ReticleError(Exception):")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1
    assert re.search(r"src/reticle/\d\d_errors\.py:\d+ uses make_app, defined later in src/reticle/\d\d_app\.py",
                     done.stderr), done.stderr
    with open(os.path.join(ROOT, "reticle.py"), encoding="utf-8") as f:
        assert (tree / "reticle.py").read_text(encoding="utf-8") == f.read(), "nothing written"


@pytest.mark.parametrize("code", ["@make_app\ndef _d():\n    pass",
                                  "def _d(x=make_app):\n    return x",
                                  "class _C(_Device):\n    pass",
                                  "class _C:\n    hub = make_app"])
def test_what_runs_at_import_counts_decorators_defaults_bases_and_class_bodies(tree, code):
    part = next((tree / "src" / "reticle").glob("*_errors.py"))
    _edit(part, "class ReticleError(Exception):", code + "\n\n\nclass ReticleError(Exception):")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1 and "defined later in" in done.stderr, done.stderr


def test_a_later_name_in_a_function_body_or_annotation_is_allowed_and_listed(tree):
    """Function bodies and (postponed) annotations run later, when every part is defined: the build
    takes them, and --forward lists them for a reader; a local of the same name is no reference."""
    part = next((tree / "src" / "reticle").glob("*_errors.py"))
    _edit(part, "class ReticleError(Exception):",
          "def _fine(make_app: int) -> int:\n    return make_app\n\n\n"
          "def _late(x: \"Optional[_Device]\") -> object:\n    return make_app\n\n\nclass ReticleError(Exception):")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 0, done.stderr
    listed = _amalgamate("--forward", root=str(tree)).stdout
    errors = [line for line in listed.splitlines() if "_errors.py" in line]
    assert any("uses _Device" in line for line in errors), listed
    assert sum("uses make_app" in line for line in errors) == 1, errors  # _late's, not _fine's parameter


def test_the_docstring_index_must_follow_the_parts(tree):
    header = next((tree / "src" / "reticle").glob("00_*.py"))
    _edit(header, "Errors | ", "")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1 and "section index" in done.stderr, done.stderr


def test_an_included_script_may_not_break_the_raw_string(tree):
    relay = tree / "src" / "sdk" / "relay.js"
    relay.write_text(relay.read_text(encoding="utf-8") + 'var s = """;\n', encoding="utf-8")
    done = _amalgamate(root=str(tree))
    assert done.returncode == 1 and "triple quote" in done.stderr, done.stderr


def test_where_names_the_part_and_line_of_a_built_line():
    with open(os.path.join(ROOT, "reticle.py"), encoding="utf-8") as f:
        built = f.read().split("\n")
    target = next(i for i, line in enumerate(built, 1) if line.startswith("class Hub"))
    done = _amalgamate("--where", str(target))
    assert done.returncode == 0, done.stderr
    path, line = done.stdout.strip().rsplit(":", 1)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert f.read().split("\n")[int(line) - 1] == built[target - 1]
    # past the embedded SDK (thousands of built lines from one part line), the map still holds
    sdk_at = built.index('_SDK_JS = r"""' + reticle._SDK_JS.split("\n")[0])
    end_at = next(i for i in range(sdk_at, len(built)) if built[i].startswith("#: end "))
    part = built[end_at].split()[-1]
    with open(os.path.join(ROOT, part), encoding="utf-8") as f:
        part_lines = f.read().rstrip("\n").count("\n") + 1
    assert _amalgamate("--where", str(end_at)).stdout.strip() == "%s:%d" % (part, part_lines)
    assert _amalgamate("--where", "999999").returncode == 2


def test_the_sdk_tables_are_the_python_tables():
    """The build put in what the Python functions answer, so both sides read one table."""
    for fn in (reticle._failure_ui_config, reticle._plain_failure_config, reticle._route_announcers_config):
        assert fn() in reticle._SDK_JS, fn.__name__


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
