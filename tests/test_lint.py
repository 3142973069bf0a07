"""The house habits, checked (STYLE 28 and 32): ruff and mypy are clean on the tree (the package under
src/reticle/ and the built reticle.py alike), no module is over 1,500 lines, every function
of reticle.py over 25 lines, and every public method of Hub, says in a docstring why it exists, and
no class is over 250 lines nor any function over 80 (issue 17).

ruff and mypy run as the project configures them (pyproject.toml), from the repository root, with the
interpreter running the tests; a finding fails the test with the tool's own output."""
import ast
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.path.join(ROOT, "reticle.py")
MAX_UNDOCUMENTED_LINES = 25


def undocumented(source: str, limit: int = MAX_UNDOCUMENTED_LINES) -> List[str]:
    """The functions (methods and nested ones included) longer than `limit` lines without a docstring,
    and the public methods of class Hub without one, as "line name (n lines)" strings."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node) is None:
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append("%d %s (%d lines)" % (node.lineno, node.name, length))
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Hub":
            for node in cls.body:
                if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
                        and ast.get_docstring(node) is None):
                    found.append("%d Hub.%s (public method)" % (node.lineno, node.name))
    return sorted(found, key=lambda s: int(s.split()[0]))


MAX_CLASS_LINES = 250
MAX_FUNCTION_LINES = 80


def oversized(source: str, class_limit: int = MAX_CLASS_LINES, function_limit: int = MAX_FUNCTION_LINES) -> List[str]:
    """The classes longer than `class_limit` lines and the functions (methods and nested ones included)
    longer than `function_limit`, as "line name (n lines)" strings (issue 17: a newcomer reads each in one go)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        limit = (class_limit if isinstance(node, ast.ClassDef)
                 else function_limit if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else 0)
        if limit:
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append("%d %s (%d lines)" % (node.lineno, node.name, length))
    return sorted(found, key=lambda s: int(s.split()[0]))


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m"] + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=240)


class DocstringCheckTest(unittest.TestCase):
    def test_long_functions_and_hub_methods_have_docstrings(self) -> None:
        with open(MODULE, encoding="utf-8") as fh:
            missing = undocumented(fh.read())
        self.assertEqual(missing, [], "functions over %d lines (or public Hub methods) without a docstring:\n%s"
                         % (MAX_UNDOCUMENTED_LINES, "\n".join(missing)))

    def test_the_check_finds_what_it_should(self) -> None:
        body = "".join("    x%d = %d\n" % (i, i) for i in range(30))
        source = ("def long_one():\n" + body + "\n\ndef short_one():\n    return 1\n\n\n"
                  "def long_documented():\n    \"\"\"Why.\"\"\"\n" + body + "\n\n"
                  "class Hub:\n    def token(self):\n        return 1\n\n    def _private(self):\n        return 2\n\n"
                  "    def outer(self):\n        \"\"\"Doc.\"\"\"\n        def inner():\n" + body.replace("    ", "            ")
                  + "        return inner\n")
        self.assertEqual(undocumented(source), ["1 long_one (31 lines)", "73 Hub.token (public method)",
                                                "81 inner (31 lines)"])


class SizeCheckTest(unittest.TestCase):
    def test_no_class_or_function_is_too_long_to_read_in_one_go(self) -> None:
        with open(MODULE, encoding="utf-8") as fh:
            found = oversized(fh.read())
        self.assertEqual(found, [], "classes over %d lines or functions over %d:\n%s"
                         % (MAX_CLASS_LINES, MAX_FUNCTION_LINES, "\n".join(found)))

    def test_the_size_check_finds_what_it_should(self) -> None:
        body = "".join("    x%d = %d\n" % (i, i) for i in range(4))
        source = "class Big:\n" + "".join("    def m%d(self):\n        return %d\n" % (i, i) for i in range(3))
        source += "\n\ndef long_one():\n" + body + "\n\ndef short_one():\n    return 1\n"
        self.assertEqual(oversized(source, class_limit=5, function_limit=4),
                         ["1 Big (7 lines)", "10 long_one (5 lines)"])


class ToolsTest(unittest.TestCase):
    def test_ruff_is_clean(self) -> None:
        result = _run("ruff", "check", "--no-cache", ".")
        self.assertEqual(result.returncode, 0, "ruff check . found:\n%s%s" % (result.stdout, result.stderr))

    def test_mypy_is_clean(self) -> None:
        # pyproject.toml names the files.  The cache lives outside the tree (the run writes nothing into
        # it), one per user and checkout, and is kept between runs: a cold run spends some 6 s of CPU
        # on the stubs of the standard library and the dependencies, a warm one re-checks reticle.py only.
        key = hashlib.sha256(ROOT.encode("utf-8")).hexdigest()[:12]
        cache = os.path.join(tempfile.gettempdir(), "reticle-mypy-cache-%d-%s" % (os.getuid(), key))
        result = _run("mypy", "--cache-dir", cache)
        self.assertEqual(result.returncode, 0, "mypy found:\n%s%s" % (result.stdout, result.stderr))

    def test_mypy_is_clean_on_the_package_the_file_is_built_from(self) -> None:
        """src/reticle/ is what people edit: mypy reads it as a package, each module with its imports."""
        key = hashlib.sha256(ROOT.encode("utf-8")).hexdigest()[:12]
        cache = os.path.join(tempfile.gettempdir(), "reticle-mypy-src-cache-%d-%s" % (os.getuid(), key))
        result = _run("mypy", "--cache-dir", cache, os.path.join("src", "reticle"))
        self.assertEqual(result.returncode, 0, "mypy src/reticle found:\n%s%s" % (result.stdout, result.stderr))
        self.assertIn("source files", result.stdout)


MAX_MODULE_LINES = 1500


class ModuleSizeTest(unittest.TestCase):
    def test_no_module_of_the_package_is_over_the_cap(self) -> None:
        folder = os.path.join(ROOT, "src", "reticle")
        found = []
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as fh:
                    lines = fh.read().count("\n")
                if lines > MAX_MODULE_LINES:
                    found.append("%s (%d lines)" % (name, lines))
        self.assertEqual(found, [], "modules over %d lines: %s" % (MAX_MODULE_LINES, ", ".join(found)))


if __name__ == "__main__":
    unittest.main()
