#!/usr/bin/env python3
"""Edit the in-page SDK as an ordinary JavaScript file.

The SDK lives inside reticle.py as the raw string ``_SDK_JS`` so that the
module stays complete on its own.  This script copies it out for editing and
linting, and back in:

    python tools/sdk.py extract [FILE]   # default build/reticle-sdk.js
    python tools/sdk.py embed [FILE]     # writes FILE back into reticle.py
    python tools/sdk.py check            # node --check on the embedded SDK
    python tools/sdk.py lint             # ESLint on the embedded SDK; exit 1 on any finding

Standard library only.  ``embed`` refuses text that cannot live in a Python
raw triple-quoted string (a triple quote, a trailing backslash).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ESLint and the browser globals list are installed here by tests/bootstrap.sh.
NODE_DIR = os.path.join(ROOT, "tests", ".js")
ESLINT = os.path.join(NODE_DIR, "node_modules", ".bin", "eslint")
# The rules the SDK must pass: code that is never used, names that are never defined, code that
# can never run, a few more mistakes that ESLint's recommended set also calls errors, and no
# function over 80 lines.
LINT_RULES = {
    "no-unused-vars": ["error", {"args": "none", "caughtErrors": "none"}],
    "no-undef": "error",
    "no-unreachable": "error",
    "no-dupe-keys": "error",
    "no-duplicate-case": "error",
    "no-redeclare": "error",
    "no-self-assign": "error",
    "no-unsafe-finally": "error",
    "no-constant-binary-expression": "error",
    "no-func-assign": "error",
    "use-isnan": "error",
    "valid-typeof": "error",
    # Small named functions: none over 80 lines (blank and comment lines aside). IIFEs count too; the
    # one wrapper that holds the whole SDK is exempt by an eslint-disable-next-line comment above it.
    "max-lines-per-function": ["error", {"max": 80, "skipBlankLines": True, "skipComments": True, "IIFEs": True}],
}
MODULE = os.path.join(ROOT, "reticle.py")
DEFAULT = os.path.join(ROOT, "build", "reticle-sdk.js")
_START = '_SDK_JS = r"""'
_END = '"""\n'


def _split(text):
    start = text.index(_START) + len(_START)
    end = text.index(_END, start)
    return text[:start], text[start:end], text[end:]


def read_sdk(module=MODULE):
    with open(module, encoding="utf-8") as f:
        return _split(f.read())[1]


def extract(path=DEFAULT):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(read_sdk())
    print("wrote %s" % os.path.relpath(path))
    return 0


def embed(path=DEFAULT):
    with open(path, encoding="utf-8") as f:
        js = f.read()
    if '"""' in js or re.search(r"\\$", js):
        print("refused: the SDK may not contain a triple quote or end with a backslash", file=sys.stderr)
        return 1
    if not js.endswith("\n"):
        js += "\n"
    with open(MODULE, encoding="utf-8") as f:
        head, _, tail = _split(f.read())
    with open(MODULE, "w", encoding="utf-8") as f:
        f.write(head + js + tail)
    print("embedded %s into reticle.py" % os.path.relpath(path))
    return 0


def _write(folder, name, text):
    """Write `text` to folder/name and answer the path."""
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def check():
    node = shutil.which("node")
    if not node:
        print("node is not on PATH; nothing checked", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([node, "--check", _write(tmp, "reticle-sdk.js", read_sdk())])
    if done.returncode == 0:
        print("the embedded SDK parses")
    return done.returncode


def _eslint_config():
    """A flat ESLint configuration for the SDK: a classic browser script (not a module), the
    browser's globals, and LINT_RULES, nothing else (no config lookup in the tree)."""
    rules = json.dumps(LINT_RULES, indent=2)
    return (
        'import globals from %s;\n'
        'export default [{\n'
        '  files: ["**/*.js"],\n'
        '  languageOptions: {ecmaVersion: 2022, sourceType: "script", globals: {...globals.browser}},\n'
        '  linterOptions: {reportUnusedDisableDirectives: "error"},\n'
        '  rules: %s,\n'
        '}];\n' % (json.dumps(os.path.join(NODE_DIR, "node_modules", "globals", "index.js")), rules))


def lint():
    """Run ESLint with LINT_RULES over the embedded SDK; 0 when clean, 1 on findings, 2 when
    ESLint is not installed (``sh tests/bootstrap.sh`` installs it)."""
    node = shutil.which("node")
    if not node or not os.path.exists(ESLINT):
        print("ESLint is not installed (sh tests/bootstrap.sh installs it into tests/.js)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, "reticle-sdk.js", read_sdk())
        config = _write(tmp, "eslint.config.mjs", _eslint_config())
        done = subprocess.run([node, ESLINT, "--config", config, "--no-warn-ignored", "--max-warnings", "0",
                               path], cwd=tmp)
    if done.returncode == 0:
        print("the embedded SDK is lint-clean")
    return 0 if done.returncode == 0 else 1


def main(argv):
    if not argv or argv[0] not in ("extract", "embed", "check", "lint"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[0] == "check":
        return check()
    if argv[0] == "lint":
        return lint()
    path = argv[1] if len(argv) > 1 else DEFAULT
    return extract(path) if argv[0] == "extract" else embed(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
