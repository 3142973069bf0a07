#!/usr/bin/env python3
"""Check and lint the in-page scripts where they are edited: under ``src/sdk/``.

The SDK is the files of ``src/sdk/reticle/`` joined in name order (one IIFE: the first file opens it,
the last closes it); ``tools/amalgamate.py`` embeds it, and each other script of ``src/sdk/`` (the
device relay, the saved-login read and restore), in ``reticle.py``.  This script reads the same
files, so a finding names the file and line you edit:

    python3 tools/sdk.py check    # node --check on each script
    python3 tools/sdk.py lint     # ESLint on each script; exit 1 on any finding
    python3 tools/sdk.py headers  # write each SDK section's provides/uses lines (--check: exit 1 if stale)

The tables the SDK shares with Python (the convention tables) reach it in its config, which the
daemon fills in when it serves the SDK.  Standard library only (ESLint itself is installed by tests/bootstrap.sh).
"""

import glob
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
# The committed ESLint configuration (the rules the scripts must pass).
ESLINT_CONFIG = os.path.join(ROOT, "tools", "eslint.config.mjs")


def scripts(root=ROOT):
    """Each in-page script as (name, text, line map): the SDK joined from its section files, then each
    other ``src/sdk/*.js``; the line map gives, for each line of the text, (file, line) in src/."""
    out = []
    parts = sorted(glob.glob(os.path.join(root, "src", "sdk", "reticle", "*.js")))
    singles = sorted(glob.glob(os.path.join(root, "src", "sdk", "*.js")))
    for name, files in [("reticle-sdk.js", parts)] + [(os.path.basename(f), [f]) for f in singles]:
        text, where = "", []
        for path in files:
            with open(path, encoding="utf-8") as f:
                body = f.read()
            rel = os.path.relpath(path, root)
            if not body.endswith("\n"):
                body += "\n"  # as the build joins them: each file ends its last line
            text += body
            where += [(rel, n) for n in range(1, body.count("\n") + 1)]
        out.append((name, text, where))
    return out


def _write(folder, name, text):
    """Write `text` to folder/name and answer the path."""
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _place(where, line):
    """'file:line' in src/ for line `line` of a joined script."""
    if 1 <= line <= len(where):
        return "%s:%d" % where[line - 1]
    return "%s:%d" % (where[-1][0], where[-1][1]) if where else "?"


def check(root=ROOT):
    """node --check on each script: 0 when all parse."""
    node = shutil.which("node")
    if not node:
        print("node is not on PATH; nothing checked", file=sys.stderr)
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, text, where in scripts(root):
            done = subprocess.run([node, "--check", _write(tmp, name, text)], capture_output=True, text=True)
            if done.returncode != 0:
                failed = 1
                line = done.stderr.split(":", 2)[1] if done.stderr.count(":") >= 2 else ""
                at = _place(where, int(line)) if line.strip().isdigit() else name
                print("%s: does not parse\n%s" % (at, done.stderr), file=sys.stderr)
    if not failed:
        print("the in-page scripts parse")
    return failed


def lint(root=ROOT):
    """Run ESLint with tools/eslint.config.mjs over each script; 0 when clean, 1 on findings (each printed as
    ``src/sdk/...js:LINE:COL rule message``), 2 when ESLint is not installed."""
    node = shutil.which("node")
    if not node or not os.path.exists(ESLINT):
        print("ESLint is not installed (sh tests/bootstrap.sh installs it into tests/.js)", file=sys.stderr)
        return 2
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        # the committed configuration, placed beside the scripts with ESLint's packages in reach
        config = os.path.join(tmp, "eslint.config.mjs")
        shutil.copy(ESLINT_CONFIG, config)
        os.symlink(os.path.join(NODE_DIR, "node_modules"), os.path.join(tmp, "node_modules"))
        paths, maps = [], {}
        for name, text, where in scripts(root):
            paths.append(_write(tmp, name, text))
            maps[os.path.realpath(paths[-1])] = where
        done = subprocess.run([node, ESLINT, "--config", config, "--no-warn-ignored", "--format", "json"] + paths,
                              cwd=tmp, capture_output=True, text=True)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            print("ESLint did not answer a report:\n%s%s" % (done.stdout, done.stderr), file=sys.stderr)
            return 1
    for entry in report:
        where = maps.get(os.path.realpath(entry["filePath"]), [])
        for m in entry.get("messages", []):
            found.append("%s:%s %s %s" % (_place(where, m.get("line") or 0), m.get("column") or 0,
                                          m.get("ruleId") or "parse", m.get("message", "")))
    for line in found:
        print(line)
    if not found:
        print("the in-page scripts are lint-clean")
    return 1 if found else 0


# -- what each section of the SDK provides and uses ---------------------------------------------------

_DECLARED = re.compile(r"^  (?:function|var|const|let) ([A-Za-z_$][\w$]*)", re.M)
_STRIP = re.compile(r"//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"|`(?:\\.|[^`\\])*`", re.S)
_HEADER = re.compile(r"^(  // == Section: [^\n]*\n)((?:  // (?:provides|uses|  )[^\n]*\n)*)", re.M)


def _sections(root=ROOT):
    """The SDK's section files, in order: (path, text)."""
    out = []
    for path in sorted(glob.glob(os.path.join(root, "src", "sdk", "reticle", "*.js"))):
        with open(path, encoding="utf-8") as f:
            out.append((path, f.read()))
    return out


def _wrapped(label, names):
    """`  // label: a, b, c` wrapped at 110 columns, continuation lines indented under the first name."""
    lines, line = [], "  // %s: " % label
    for i, name in enumerate(names):
        piece = name + (", " if i < len(names) - 1 else "")
        if len(line) + len(piece) > 110 and line.strip() not in ("//", "// %s:" % label):
            lines.append(line.rstrip())
            line = "  //   "
        line += piece
    lines.append(line.rstrip())
    return "".join(x + "\n" for x in lines)


def headers(root=ROOT):
    """Each section's header as it should read: what it declares at the top of the SDK's function (its
    functions and variables) and what it uses of the other sections' -> {path: (text with it, changed)}."""
    sections = _sections(root)
    owner = {}
    for path, text in sections:
        for name in _DECLARED.findall(text):
            owner.setdefault(name, path)
    out = {}
    for path, text in sections:
        mine = [n for n in _DECLARED.findall(text) if owner[n] == path]
        code = _STRIP.sub(" ", _HEADER.sub(r"\1", text))
        local = set(re.findall(r"\b(?:var|let|const|function)\s+([A-Za-z_$][\w$]*)", code))  # names of its own
        for params in re.findall(r"function\s*[\w$]*\s*\(([^)]*)\)|catch\s*\(([^)]*)\)", code):
            local.update(re.findall(r"[A-Za-z_$][\w$]*", " ".join(params)))
        used = sorted({w for w in re.findall(r"(?<![\w$.])[A-Za-z_$][\w$]*", code)
                       if w in owner and owner[w] != path and w not in local},
                      key=lambda w: (os.path.basename(owner[w]), w))
        block = (_wrapped("provides", mine) if mine else "") + (
            _wrapped("uses", ["%s (%s)" % (w, os.path.basename(owner[w])[:2]) for w in used]) if used else "")
        found = _HEADER.search(text)
        if found is None:
            out[path] = (text, False)
            continue
        new = text[:found.end(1)] + block + text[found.end():]
        out[path] = (new, new != text)
    return out


def main(argv):
    if len(argv) not in (1, 2) or argv[0] not in ("check", "lint", "headers"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[0] == "headers":
        stale = [p for p, (_t, changed) in headers().items() if changed]
        if argv[1:] == ["--check"]:
            for p in stale:
                print("%s: its provides/uses header is not what it declares and uses (python3 tools/sdk.py headers)"
                      % os.path.relpath(p, ROOT))
            return 1 if stale else 0
        for p, (text, changed) in headers().items():
            if changed:
                with open(p, "w", encoding="utf-8") as f:
                    f.write(text)
        print("rewrote %d section header(s)" % len(stale))
        return 0
    return check() if argv[0] == "check" else lint()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
