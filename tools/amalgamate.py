#!/usr/bin/env python3
"""Build the one shipped ``reticle.py`` from its parts (SQLite's amalgamation, for Python).

People edit small files; users get one.  The Python sections live as ordered parts under
``src/reticle/`` (``NN_name.py``: the number is the reading order) and the in-page scripts as real
files under ``src/sdk/`` (and the demo page under ``src/assets/``).  This script writes
``reticle.py`` from them:

* a header: the shebang, the licence (``LICENSE``, as comments) and a notice that the file is built;
* each part between ``#: begin <path>`` and ``#: end <path>`` markers;
* a part's line ``NAME = r\"\"\"#include src/sdk/x.js\"\"\"`` replaced by the file's text as a raw
  string (a glob such as ``src/sdk/reticle/*.js`` joins the files in name order);
* in an included script, a table the script takes from Python, written ``/*@python _fn*/ <default>``,
  replaced by what the part's function ``_fn()`` returns (a JavaScript literal), computed here: the
  function and the module-level names it needs are run from the parts with the standard library only.

Checks, run by every build and by ``--check``: a part uses only names defined in earlier parts or
itself (the reading order; a name of a later part, even inside a function body, is refused), each
part holds exactly one section banner, and the module docstring's section index lists the banners in
order.  ``--check`` also fails when the committed ``reticle.py`` is not the build.

    python3 tools/amalgamate.py            # write reticle.py
    python3 tools/amalgamate.py --check    # exit 1 when reticle.py is not the build of src/
    python3 tools/amalgamate.py --where N  # which part (and line) reticle.py's line N comes from

Standard library only; runs on CPython 3.9 and newer.
"""

import __future__
import argparse
import ast
import builtins
import difflib
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = os.path.join("src", "reticle")
OUTPUT = "reticle.py"
_PART_NAME = re.compile(r"^\d\d_[a-z0-9_]+\.py$")
_INCLUDE = re.compile(r'^(\w+) = r"""#include ([\w./*-]+)"""$')
_TABLE = re.compile(r"/\*@python (\w+)\*/ ?")
_BANNER = re.compile(r"^# (.+?) #{3,}$")
NOTICE = """\
#
# This file is BUILT: tools/amalgamate.py wrote it from the parts under src/reticle/ (the Python
# sections, in reading order) and src/sdk/ (the in-page scripts).  Do not edit it by hand: edit the
# parts, then run `python3 tools/amalgamate.py`.  Each part sits between `#: begin <part>` and
# `#: end <part>`; `python3 tools/amalgamate.py --where LINE` names the part line of a traceback's line.
# To vendor Reticle, copy this one file and keep this header."""


class BuildError(Exception):
    """The parts cannot make a reticle.py: the message says which part and why."""


def _read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def part_paths(root=ROOT):
    """The parts, in reading order (their names sort as they read)."""
    names = sorted(os.listdir(os.path.join(root, PARTS)))
    paths = [os.path.join(PARTS, n).replace(os.sep, "/") for n in names if n.endswith(".py")]
    odd = [p for p in paths if not _PART_NAME.match(os.path.basename(p))]
    if odd:
        raise BuildError("a part's name is NN_name.py (two digits, then lower-case words): %s" % ", ".join(odd))
    return paths


# -- names: what each part defines at module level, and what it uses ------------------------------

def _target_names(node):
    """The names an assignment target binds."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*[_target_names(e) for e in node.elts]) if node.elts else set()
    if isinstance(node, ast.Starred):
        return _target_names(node.value)
    return set()


def _binds(stmt):
    """The names one statement binds in the scope it runs in (not inside nested functions)."""
    out = set()
    for node in _walk_scope(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                out |= _target_names(t)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            out |= _target_names(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    out |= _target_names(item.optional_vars)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.NamedExpr):
            out |= _target_names(node.target)
    return out


def _walk_scope(node, annotations=True):
    """ast.walk that does not enter function, lambda or class bodies (their own scopes), though it
    yields the definition itself and what is evaluated where it stands (decorators, defaults, bases,
    and the annotations unless `annotations` is false: postponed, they never run)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(_outer_parts(n, annotations))
            continue
        if isinstance(n, ast.AnnAssign) and not annotations:
            todo.extend(x for x in (n.target, n.value) if x is not None)
            continue
        todo.extend(ast.iter_child_nodes(n))


def _outer_parts(fn, annotations=True):
    """What a definition reads in the enclosing scope: decorators, defaults, bases, annotations."""
    out = list(getattr(fn, "decorator_list", []))
    if isinstance(fn, ast.ClassDef):
        out += fn.bases + [k.value for k in fn.keywords]
    else:
        a = fn.args
        out += [d for d in a.defaults + a.kw_defaults if d is not None]
        if annotations:
            out += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                    if x is not None and x.annotation is not None]
            out += [fn.returns] if getattr(fn, "returns", None) is not None else []
    return out


def _loads(tree, module_names, bodies=True):
    """The module-level names a tree reads (a Name loaded in a scope where no enclosing function binds
    it), each with the first line it is read on; names that are nowhere module-level are left out.
    With `bodies` false, only what runs when the module is imported: no function body and no
    annotation (the module postpones them), but class bodies, decorators, defaults and bases."""
    found = {}

    def visit(node, local):
        for n in _walk_scope(node, annotations=bodies):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
                if n.id in module_names and n.id not in found:
                    found[n.id] = n.lineno
            elif bodies and isinstance(n, ast.Constant) and isinstance(n.value, str) and _in_annotation(n):
                for word in re.findall(r"[A-Za-z_]\w*", n.value):  # "Hub" and Optional["_Device"]
                    if word in module_names and word not in local and word not in found:
                        found[word] = n.lineno
            if bodies and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = set(local)
                args = n.args
                for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    if a is not None:
                        inner.add(a.arg)
                body = n.body if isinstance(n.body, list) else [n.body]
                declared = {g for s in body for x in ast.walk(s) if isinstance(x, ast.Global) for g in x.names}
                for s in body:
                    inner |= _binds(s)
                inner -= declared
                for s in body:
                    visit(s, inner)
            elif isinstance(n, ast.ClassDef):
                for s in n.body:
                    visit(s, local)

    _mark_annotations(tree)
    for stmt in tree.body:
        visit(stmt, set())
    return found


def _mark_annotations(tree):
    """Tag the string constants that stand in annotations (forward references such as "Hub")."""
    for node in ast.walk(tree):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            anns = [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                    if x is not None and x.annotation is not None] + ([node.returns] if node.returns else [])
        elif isinstance(node, ast.AnnAssign):
            anns = [node.annotation]
        for ann in anns:
            for c in ast.walk(ann):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    c._reticle_annotation = True


def _in_annotation(node):
    return getattr(node, "_reticle_annotation", False)


def check_order(parts, bodies=False):
    """Each part uses only names defined in earlier parts or itself, as the built module runs them at
    import (STYLE 5): the offences, one line each ("src/reticle/07_x.py:12 uses Hub, defined later in
    src/reticle/16_app.py").  With `bodies`, every use counts, function bodies and annotations too:
    the forward references a reader meets (``--forward`` lists them; they are allowed)."""
    trees = [(path, ast.parse(text, path)) for path, text in parts]
    defined_in = {}
    for index, (_path, tree) in enumerate(trees):
        for stmt in tree.body:
            for name in _binds(stmt):
                defined_in.setdefault(name, index)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                for name in node.names:
                    defined_in.setdefault(name, index)
    names = set(defined_in) - set(dir(builtins))
    offences = []
    for index, (path, tree) in enumerate(trees):
        for name, line in sorted(_loads(tree, names, bodies).items(), key=lambda kv: kv[1]):
            if defined_in[name] > index:
                offences.append("%s:%d uses %s, defined later in %s" % (path, line, name, trees[defined_in[name]][0]))
    return offences


# -- tables the scripts take from Python ----------------------------------------------------------

def _table_values(parts, wanted):
    """Run the functions `wanted` (names of module-level functions of the parts) with only what they
    need: the module-level statements that bind the names they read, transitively, in part order."""
    stmts = []
    for path, text in parts:
        for stmt in ast.parse(text, path).body:
            stmts.append((stmt, _binds(stmt)))
    binders = {}
    for i, (_stmt, bound) in enumerate(stmts):
        for name in bound:
            binders.setdefault(name, []).append(i)
    all_names = set(binders)
    need, todo = set(), list(wanted)
    while todo:
        name = todo.pop()
        for i in binders.get(name, []):
            if i in need:
                continue
            need.add(i)
            stmt = stmts[i][0]
            if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                todo.extend(_loads(ast.Module(body=[stmt], type_ignores=[]), all_names))
    module = ast.Module(body=[stmts[i][0] for i in sorted(need)], type_ignores=[])
    namespace = {"__name__": "reticle_build_tables"}
    try:
        flags = __future__.annotations.compiler_flag  # as in the built module: annotations stay unevaluated
        exec(compile(module, "<the parts' tables>", "exec", flags=flags, dont_inherit=True), namespace)
        return {name: namespace[name]() for name in wanted}
    except Exception as exc:  # a table that needs more than the standard library, or a bug in it
        raise BuildError("the tables %s could not be computed from the parts: %s: %s"
                         % (", ".join(sorted(wanted)), type(exc).__name__, exc)) from exc


def _default_end(text, at):
    """Where the default literal that follows a table marker ends: a bracketed literal, a quoted
    string without quotes inside, or a word such as null."""
    if text[at] in "[{":
        depth = 0
        for i in range(at, len(text)):
            depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return i + 1
        raise BuildError("a table's default literal is never closed")
    if text[at] in "'\"":
        return text.index(text[at], at + 1) + 1
    m = re.compile(r"\w+").match(text, at)
    if not m:
        raise BuildError("a table marker must be followed by a default literal ([], {}, '', null)")
    return m.end()


def _scripts(parts):
    """Each include's text, with its tables put in: {(part, line): text}."""
    includes = {}
    for path, text in parts:
        for n, line in enumerate(text.split("\n"), 1):
            m = _INCLUDE.match(line)
            if m:
                files = sorted(glob.glob(os.path.join(ROOT, m.group(2))))
                if not files:
                    raise BuildError("%s:%d includes %s, which names no file" % (path, n, m.group(2)))
                texts = [_read(os.path.relpath(f, ROOT)) for f in files]
                includes[(path, n)] = "".join(t if t.endswith("\n") or len(texts) == 1 else t + "\n" for t in texts)
    wanted = {name for text in includes.values() for name in _TABLE.findall(text)}
    values = _table_values(parts, sorted(wanted)) if wanted else {}
    for key, text in includes.items():
        out, at = [], 0
        for m in _TABLE.finditer(text):
            value = values[m.group(1)]
            if not isinstance(value, str):
                raise BuildError("the table %s() must return a JavaScript literal as a str" % m.group(1))
            before = text[at:m.start()]
            out.append((before.rstrip(" ") if value.startswith("\n") else before) + value)  # no trailing space
            at = _default_end(text, m.end())
        out.append(text[at:])
        text = "".join(out)
        if '"""' in text or text.endswith("\\") or "\r" in text:
            raise BuildError("%s:%d: an included script may hold no triple quote, carriage return or trailing "
                             "backslash (it is embedded as a raw string)" % key)
        includes[key] = text
    return includes


# -- the build ------------------------------------------------------------------------------------

def _header():
    licence = ["#" + (" " + line if line else "") for line in _read("LICENSE").rstrip("\n").split("\n")]
    return "#!/usr/bin/env python3\n" + "\n".join(licence) + "\n" + NOTICE + "\n"


def check_banners(parts):
    """One section banner per part, and the module docstring's section index lists them in order."""
    problems, titles = [], []
    for path, text in parts[1:]:
        found = [m.group(1) for m in map(_BANNER.match, text.split("\n")) if m]
        if len(found) != 1:
            problems.append("%s holds %d section banners (one '# Name ####' line each part)" % (path, len(found)))
        titles += [re.sub(r"\s*\(.*\)$", "", t) for t in found[:1]]  # "Tools (schemas, ...)" is "Tools"
    doc = ast.get_docstring(ast.parse(parts[0][1])) or ""
    m = re.search(r"^Sections[^\n]*:\n((?:.+\n)+)", doc + "\n", re.M)
    index = [t.strip().rstrip(".") for t in m.group(1).replace("\n", " ").split("|")] if m else []
    if index != titles:
        problems.append("the docstring's section index (%s) is not the parts' banners in order (%s)"
                        % (" | ".join(index) or "missing", " | ".join(titles)))
    return problems


def build(root=ROOT):
    """The text of reticle.py, and the line map: for each of its lines, (part path, line) or None."""
    paths = part_paths(root)
    parts = [(p, _read(p)) for p in paths]
    problems = check_order(parts) + check_banners(parts)
    if problems:
        raise BuildError("the parts break the house rules:\n  " + "\n  ".join(problems))
    includes = _scripts(parts)
    header = _header()
    out = [header]
    where = [None] * header.count("\n")
    for path, text in parts:
        out.append("#: begin %s\n" % path)
        where.append((path, 0))
        lines = text.rstrip("\n").split("\n")
        for n, line in enumerate(lines, 1):
            if (path, n) in includes:
                name = _INCLUDE.match(line).group(1)
                body = '%s = r"""%s"""' % (name, includes[(path, n)])
                out.append(body + "\n")
                where.extend([(path, n)] * (body.count("\n") + 1))
            else:
                out.append(line + "\n")
                where.append((path, n))
        out.append("#: end %s\n" % path)
        where.append((path, len(lines) + 1))
        if path != paths[-1]:
            out.append("\n\n")
            where.extend([None, None])
    return "".join(out), where


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tools/amalgamate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when reticle.py is not the build of src/")
    parser.add_argument("--where", type=int, metavar="LINE", help="the part and line of reticle.py's LINE")
    parser.add_argument("--forward", action="store_true",
                        help="list the names a part's functions or annotations take from later parts")
    args = parser.parse_args(argv)
    if args.forward:
        found = check_order([(p, _read(p)) for p in part_paths()], bodies=True)
        print("\n".join(found + ["%d forward reference(s)" % len(found)]))
        return 0
    try:
        text, where = build()
    except BuildError as exc:
        print("amalgamate: %s" % exc, file=sys.stderr)
        return 1
    target = os.path.join(ROOT, OUTPUT)
    if args.where is not None:
        if not 1 <= args.where <= len(where):
            print("amalgamate: reticle.py has lines 1 to %d" % len(where), file=sys.stderr)
            return 2
        spot = where[args.where - 1]
        print("%s:%d" % spot if spot else "the built header (tools/amalgamate.py)")
        return 0
    if args.check:
        with open(target, encoding="utf-8") as f:
            committed = f.read()
        if committed != text:
            diff = list(difflib.unified_diff(committed.split("\n"), text.split("\n"), "reticle.py (committed)",
                                             "reticle.py (built from src/)", n=1, lineterm=""))
            print("amalgamate: reticle.py is not the build of src/ (edit the parts, then run python3 "
                  "tools/amalgamate.py); the first differences:\n" + "\n".join(diff[:40]), file=sys.stderr)
            return 1
        print("reticle.py is the build of src/ (%d parts)" % len(part_paths()))
        return 0
    with open(target, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print("wrote reticle.py (%d lines) from %d parts" % (text.count("\n"), len(part_paths())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
