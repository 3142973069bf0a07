#!/usr/bin/env python3
"""Build the one shipped ``reticle.py`` from the package ``src/reticle/`` (SQLite's amalgamation, for Python).

People edit a package of small modules that import what they use from each other; users get one file.
The in-page scripts are real files under ``src/sdk/`` (and the demo page under ``src/assets/``).  This
script writes ``reticle.py`` from them:

* a header: the shebang, the licence (``LICENSE``, as comments) and a notice that the file is built;
* the package's face (``__init__.py``: its docstring and ``__all__``), then every absolute import of
  every module, once (the standard library's first; then the ``reexec`` module, which must run before
  the third-party imports; then the third-party ones);
* each module, after every module it imports, between ``#: begin <path>`` and ``#: end <path>``
  markers, under a banner made of its docstring, without its imports (the imports between modules are
  dropped: joined, they share one namespace); ``__main__.py`` last;
* a module's line ``NAME = r\"\"\"#include src/sdk/x.js\"\"\"`` replaced by the file's text as a raw
  string (a glob such as ``src/sdk/reticle/*.js`` joins the files in name order).  Nothing of the
  package runs during the build: what the scripts need from Python (the convention tables) the daemon
  sends in the SDK's config when it serves it.

The build refuses what would change meaning once the modules are joined: an import cycle between
modules (``if TYPE_CHECKING:`` imports included, so the house stays layered), an import of a name its
module does not define, two modules defining the same top-level name, a module that uses another
module's name without importing it, module-level code that changes a name imported from another
module (import-time side effects), and a name another module imports that a function rebinds with
``global`` (the importer would keep the old value).  ``--check`` also fails when the committed
``reticle.py`` is not the build.

    python3 tools/amalgamate.py            # write reticle.py
    python3 tools/amalgamate.py --check    # exit 1 when reticle.py is not the build of src/
    python3 tools/amalgamate.py --where N  # which module (and line) reticle.py's line N comes from
    python3 tools/amalgamate.py --order    # the modules in build order, each with what it imports

Standard library only; runs on CPython 3.9 and newer.
"""

import argparse
import ast
import builtins
import difflib
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join("src", "reticle")
OUTPUT = "reticle.py"
FACE = "__init__"          # the package's face: docstring, __all__, the public names handed on
PROLOGUE = "reexec"        # runs before the third-party imports (serve re-execs itself from bytecode first)
LAST = "__main__"          # the command line guard, at the very end
THIRD_PARTY = ("tornado", "jsonschema", "cryptography")
_MODULE_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.py$")
_INCLUDE = re.compile(r'^(\w+) = r"""#include ([\w./*-]+)"""$')
NOTICE = """\
#
# This file is BUILT: tools/amalgamate.py wrote it from the package src/reticle/ (each module after
# the modules it imports, their imports of each other dropped) and src/sdk/ (the in-page scripts).  Do
# not edit it by hand: edit the modules, then run `python3 tools/amalgamate.py`.  Each module sits
# between `#: begin <module>` and `#: end <module>`; `python3 tools/amalgamate.py --where LINE` names the
# module line (or script line) of a traceback's line.  To vendor Reticle, copy this one file and keep
# this header."""


class BuildError(Exception):
    """The modules cannot make a reticle.py: the message says which module and why."""


def _read(path, root=ROOT):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def module_paths(root=ROOT):
    """The package's modules, by name."""
    names = sorted(os.listdir(os.path.join(root, PACKAGE)))
    paths = [os.path.join(PACKAGE, n).replace(os.sep, "/") for n in names if n.endswith(".py")]
    odd = [p for p in paths if not _MODULE_NAME.match(os.path.basename(p))]
    if odd:
        raise BuildError("a module's name is lower-case words joined by _: %s" % ", ".join(odd))
    return paths


def _name(path):
    return os.path.basename(path)[:-3]


# -- names: what each module defines at module level, and what it uses ------------------------------

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
        elif isinstance(node, (ast.For, ast.AsyncFor)):
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
    """ast.walk that does not enter function, lambda, class or comprehension bodies (their own scopes),
    though it yields the definition itself and what is evaluated where it stands (decorators, defaults,
    bases, and the annotations unless `annotations` is false: postponed, they never run)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(_outer_parts(n, annotations))
            continue
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            todo.append(n.generators[0].iter)  # the rest runs in the comprehension's own scope
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


def _comprehension_scope(n):
    """A comprehension's own scope: its targets bound, what it reads (all but the first iterable)."""
    bound = set()
    for gen in n.generators:
        bound |= _target_names(gen.target)
    parts = [g.target for g in n.generators] + [x for g in n.generators[1:] for x in [g.iter]]
    parts += [c for g in n.generators for c in g.ifs]
    parts += [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
    return bound, parts


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
            if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                bound, parts = _comprehension_scope(n)
                for p in parts:
                    visit(p, local | bound)
            elif bodies and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
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


# -- the package: modules, their imports of each other, and the order they are joined in ---------------

def _type_checking_block(stmt):
    """An `if TYPE_CHECKING:` block (no else): its imports are for the type checker only."""
    return (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"
            and not stmt.orelse)


class Module:
    """One module of the package, read: its statements sorted into what the build keeps and drops."""

    def __init__(self, path, text):
        self.path, self.name, self.text = path, _name(path), text
        self.tree = ast.parse(text, path)
        self.lines = text.split("\n")
        self.docstring = ast.get_docstring(self.tree, clean=False)
        self.imports = {}     # name bound here -> (module, name) for an import from another module of the package
        self.uses = {}        # module -> [names], at run time
        self.type_uses = {}   # module -> [names], under TYPE_CHECKING
        self.absolute = []    # (statement, source text) of each import from outside the package
        self.body = []        # the statements the build keeps
        for stmt in self.tree.body:
            if stmt is self.tree.body[0] and self.docstring is not None:
                continue
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                continue
            if isinstance(stmt, ast.ImportFrom) and stmt.level:
                self._relative(stmt, self.uses)
            elif _type_checking_block(stmt) and all(isinstance(s, ast.ImportFrom) and s.level for s in stmt.body):
                for s in stmt.body:
                    self._relative(s, self.type_uses)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.absolute.append((stmt, self.source(stmt)))
            else:
                self.body.append(stmt)
        self.defines = set()
        for stmt in self.body:
            self.defines |= _binds(stmt)

    def _relative(self, stmt, into):
        if stmt.level != 1 or not stmt.module or any(a.name == "*" for a in stmt.names):
            raise BuildError("%s:%d: import from a sibling module by name (from .name import a, b), "
                             "not from a parent package or with *" % (self.path, stmt.lineno))
        for a in stmt.names:
            self.imports[a.asname or a.name] = (stmt.module, a.name, stmt.lineno)
            into.setdefault(stmt.module, []).append(a.name)

    def source(self, stmt):
        return "\n".join(self.lines[stmt.lineno - 1:stmt.end_lineno])

    def first_line(self, stmt):
        decorators = getattr(stmt, "decorator_list", [])
        return min([stmt.lineno] + [d.lineno for d in decorators])


def read_package(root=ROOT):
    return [Module(p, _read(p, root)) for p in module_paths(root)]


def check_package(modules):
    """What would change meaning once the modules are joined into one namespace: the offences, one
    line each, naming the module and line."""
    by_name = {m.name: m for m in modules}
    offences = []
    owner = {}
    for m in modules:
        for name in sorted(m.defines):
            if name in owner and name not in ("TYPE_CHECKING",):
                offences.append("%s defines %s, which %s defines too (joined, one would replace the other)"
                                % (m.path, name, owner[name].path))
            owner.setdefault(name, m)
    absolute, example = {}, {}
    for m in modules:
        for stmt, _text in m.absolute:
            for a in stmt.names:
                bound = (a.asname or a.name).split(".")[0]
                key = (bound, stmt.module if isinstance(stmt, ast.ImportFrom) else a.name.split(".")[0], a.name)
                if bound in owner:
                    offences.append("%s:%d imports %s, which %s defines" % (m.path, stmt.lineno, bound,
                                                                         owner[bound].path))
                absolute.setdefault(bound, set()).add(key)
                example.setdefault(bound, "import %s" % a.name if isinstance(stmt, ast.Import)
                                   else "from %s import %s" % (stmt.module, a.name))
    for bound, keys in sorted(absolute.items()):
        if len({k[1:] for k in keys}) > 1 and len({k[1] for k in keys}) > 1:
            offences.append("the name %s is imported from different places: %s"
                            % (bound, ", ".join(sorted("%s.%s" % k[1:] for k in keys))))
    for m in modules:
        for local, (mod, name, line) in sorted(m.imports.items()):
            if mod not in by_name:
                offences.append("%s:%d imports from .%s, which is no module of the package" % (m.path, line, mod))
            elif name not in by_name[mod].defines:
                offences.append("%s:%d imports %s from .%s, which does not define it" % (m.path, line, name, mod))
            elif local != name:
                offences.append("%s:%d imports %s as %s: joined, the module would see no %s"
                                % (m.path, line, name, local, local))
    all_names = (set(owner) | set(absolute)) - set(dir(builtins))
    for m in modules:
        body = ast.Module(body=m.body, type_ignores=[])
        own = {(a.asname or a.name).split(".")[0] for stmt, _text in m.absolute for a in stmt.names}
        for name, line in sorted(_loads(body, all_names).items(), key=lambda kv: kv[1]):
            if name in m.defines or name in m.imports or name in own:
                continue
            if name in owner:
                offences.append("%s:%d uses %s without importing it (from .%s import %s)"
                                % (m.path, line, name, owner[name].name, name))
            else:  # joined, another module's import would lend it; as a package it is undefined
                offences.append("%s:%d uses %s without importing it (%s)" % (m.path, line, name, example[name]))
        offences += _side_effects(m)
    rebound = {}
    for m in modules:
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Global):
                for name in node.names:
                    rebound.setdefault(name, m)
    for m in modules:
        for _local, (mod, name, line) in sorted(m.imports.items()):
            if name in rebound and rebound[name].name == mod:
                offences.append("%s:%d imports %s, which %s rebinds with `global` at run time (an importer keeps "
                                "the old value)" % (m.path, line, name, rebound[name].path))
    offences += ["import cycle: " + " -> ".join(c) for c in _cycles(modules)]
    face = by_name.get(FACE)
    for stmt in face.body if face is not None else []:
        if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["__all__"]:
            for name in ast.literal_eval(stmt.value):
                if name not in face.imports and name not in face.defines:
                    offences.append("%s: __all__ names %s, which the package's face does not import"
                                    % (face.path, name))
    return offences


def _side_effects(m):
    """Module-level code of `m` that changes a name another module of the package defines."""
    found = []
    for stmt in m.body:
        for node in _walk_scope(stmt, annotations=False):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                targets = [node.func]
            for t in targets:
                base = t
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if base is not t and isinstance(base, ast.Name) and base.id in m.imports:
                    verb = "calls a method of" if isinstance(node, ast.Call) else "changes"
                    if verb == "calls a method of" and not _mutating(t.attr):
                        continue
                    found.append("%s:%d %s %s (from .%s) when it is imported: joined, the order of the modules "
                                 "would decide what it holds" % (m.path, node.lineno, verb, base.id,
                                                                m.imports[base.id][0]))
    return found


def _mutating(method):
    return method in ("append", "extend", "insert", "pop", "remove", "clear", "update", "add", "discard",
                      "setdefault", "popitem", "sort", "reverse", "appendleft", "extendleft", "register")


def _edges(modules, kinds=("run", "type")):
    names = {m.name for m in modules}
    out = {}
    for m in modules:
        deps = set()
        if "run" in kinds:
            deps |= set(m.uses)
        if "type" in kinds:
            deps |= set(m.type_uses)
        out[m.name] = sorted(d for d in deps if d in names and d != m.name)
    return out


def _cycles(modules, kinds=("run", "type")):
    """The import cycles (each once, as a path that returns to its start)."""
    edges = _edges(modules, kinds)
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        for v in sorted(edges):
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    paths = []
    for comp in comps:  # one concrete loop through the component, for the message
        start, path, seen = comp[0], [comp[0]], {comp[0]}
        while True:
            nxt = next((w for w in edges[path[-1]] if w in comp), None)
            if nxt is None or nxt in seen:
                path.append(nxt or start)
                break
            path.append(nxt)
            seen.add(nxt)
        paths.append(path)
    return paths


def floors(modules):
    """Each module's floor: 1 for a module that imports no other, else one above the highest it imports."""
    edges = _edges(modules)
    floor = {}

    def of(name, seen=()):
        if name not in floor:
            floor[name] = 1 + max((of(d, seen + (name,)) for d in edges[name] if d not in seen), default=0)
        return floor[name]

    for m in modules:
        of(m.name)
    return floor


def build_order(modules):
    """The modules in the order they are joined: each after all it imports (by floor, then by name),
    the face first and __main__ last."""
    floor = floors(modules)
    special = {FACE: -2, PROLOGUE: -1, LAST: 10 ** 6}
    return sorted(modules, key=lambda m: (special.get(m.name, floor[m.name]), m.name))


# -- the in-page scripts --------------------------------------------------------------------------

def _scripts(modules, root=ROOT):
    """Each include's lines, each with the file and line it comes from, and whether the text ends with a
    newline:
    {(module path, line): ([(text, (file, line)), ...], newline)}."""
    raw = {}
    for m in modules:
        for n, line in enumerate(m.lines, 1):
            found = _INCLUDE.match(line)
            if found:
                files = sorted(glob.glob(os.path.join(root, found.group(2))))
                if not files:
                    raise BuildError("%s:%d includes %s, which names no file" % (m.path, n, found.group(2)))
                rel = [os.path.relpath(f, root).replace(os.sep, "/") for f in files]
                raw[(m.path, n)] = [(path, _read(path, root)) for path in rel]
    includes = {}
    for key, pieces in raw.items():
        out = []
        for path, text in pieces:
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            for n, line in enumerate(lines, 1):
                out.append((line, (path, n)))
        joined = "\n".join(t for t, _ in out)
        if '"""' in joined or joined.endswith("\\") or "\r" in joined:
            raise BuildError("%s:%d: an included script may hold no triple quote, carriage return or trailing "
                             "backslash (it is embedded as a raw string)" % key)
        if "/*@python" in joined:
            raise BuildError("%s:%d: an included script takes no table from Python at build time any more: the "
                             "daemon sends its tables in the SDK's config (sdk.py)" % key)
        includes[key] = (out, len(pieces) > 1 or pieces[0][1].endswith("\n"))
    return includes


# -- the build ------------------------------------------------------------------------------------

def _header(root=ROOT):
    licence = ["#" + (" " + line if line else "") for line in _read("LICENSE", root).rstrip("\n").split("\n")]
    return "#!/usr/bin/env python3\n" + "\n".join(licence) + "\n" + NOTICE + "\n"


def _banner(m):
    """A module's docstring as the banner the built file shows for it."""
    doc = (m.docstring or m.name).strip("\n").split("\n")
    out = ["#" * 79, ("# %s " % doc[0].rstrip(".")).ljust(79, "#"), "#" * 79]
    rest = "\n".join(doc[1:]).strip("\n")
    return out + [("# " + line).rstrip() for line in rest.split("\n")] if rest else out


class _Writer:
    """The built text and its line map: for each line, (path, line) or None."""

    def __init__(self):
        self.out, self.where = [], []

    def add(self, text, spot):
        for line in text.split("\n"):
            self.out.append(line)
            self.where.append(spot)

    def text(self):
        return "\n".join(self.out) + "\n"


def build(root=ROOT):
    """The text of reticle.py, and the line map: for each of its lines, (path, line) or None."""
    modules = read_package(root)
    problems = check_package(modules)
    if problems:
        raise BuildError("the package breaks the house rules:\n  " + "\n  ".join(problems))
    order = build_order(modules)
    includes = _scripts(modules, root)
    w = _Writer()
    for line in _header(root).rstrip("\n").split("\n"):
        w.add(line, None)
    face = next(m for m in order if m.name == FACE)
    doc = face.tree.body[0]
    w.add(face.source(doc), (face.path, doc.lineno))
    w.add("", None)
    w.add("from __future__ import annotations", None)
    stdlib, third = _joined_imports(order)
    for stmt in face.body:
        w.add("", None)
        w.add(face.source(stmt), (face.path, stmt.lineno))
    w.add("", None)
    for text, spot in stdlib:
        w.add(text, spot)
    prologue = next((m for m in order if m.name == PROLOGUE), None)
    if prologue is not None:
        _module(w, prologue, includes)
    w.add("", None)
    if third:
        w.add("# The third-party imports come after the re-exec block on purpose: `reticle serve` re-execs itself "
              "from", None)
        w.add("# bytecode before paying for tornado, jsonschema and cryptography (E402).", None)
    for text, spot in third:
        w.add(text.replace("\n", "  # noqa: E402\n", 1) if text.endswith(")") else text + "  # noqa: E402", spot)
    for m in order:
        if m.name not in (FACE, PROLOGUE):
            w.add("", None)
            w.add("", None)
            _module(w, m, includes)
    return w.text(), w.where


def _joined_imports(order):
    """Every module's imports from outside the package, once: `import x` lines, then one `from x import
    a, b` per module x; the standard library's, and the third-party ones apart. -> two lists of
    (text, where the first of it was imported)."""
    plain, names, spot = {}, {}, {}
    for m in order:
        for stmt, _text in m.absolute:
            where = (m.path, stmt.lineno)
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    line = "import %s" % a.name + (" as %s" % a.asname if a.asname else "")
                    plain.setdefault(line, where)
            else:
                for a in stmt.names:
                    names.setdefault(stmt.module, {}).setdefault(a.name + (" as %s" % a.asname if a.asname else ""),
                                                                 where)
                spot.setdefault(stmt.module, where)
    stdlib, third = [], []
    for line in sorted(plain):
        (third if line.split()[1].split(".")[0] in THIRD_PARTY else stdlib).append((line, plain[line]))
    for module in sorted(names):
        listed = sorted(names[module], key=lambda n: (n != "TYPE_CHECKING", n.lower()))
        text = "from %s import %s" % (module, ", ".join(listed))
        if len(text) > 100:
            text = "from %s import (\n%s\n)" % (module, "\n".join("    %s," % n for n in listed))
        (third if module.split(".")[0] in THIRD_PARTY else stdlib).append((text, spot[module]))
    return stdlib, third


def _module(w, m, includes):
    """One module's banner and kept statements, with the blank lines and comments between them."""
    w.add("#: begin %s" % m.path, (m.path, 0))
    for line in _banner(m):
        w.add(line, (m.path, 1))
    if not m.body:
        w.add("#: end %s" % m.path, (m.path, len(m.lines)))
        return
    start = m.first_line(m.body[0])
    # the comments right above the first kept statement belong to it
    while start > 1 and m.lines[start - 2].startswith("#"):
        start -= 1
    w.add("", None)
    n = start
    last = m.body[-1].end_lineno
    while n <= last:
        line = m.lines[n - 1]
        if (m.path, n) in includes:
            name = _INCLUDE.match(line).group(1)
            pieces, newline = includes[(m.path, n)]
            w.add('%s = r"""%s' % (name, pieces[0][0]), pieces[0][1])
            for text, spot in pieces[1:]:
                w.add(text, spot)
            if newline:
                w.add('"""', (m.path, n))
            else:
                w.out[-1] += '"""'
            n += 1
            continue
        w.add(line, (m.path, n))
        n += 1
    w.add("#: end %s" % m.path, (m.path, len(m.lines)))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tools/amalgamate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when reticle.py is not the build of src/")
    parser.add_argument("--where", type=int, metavar="LINE", help="the module and line of reticle.py's LINE")
    parser.add_argument("--order", action="store_true",
                        help="list the modules in build order, with their floor and what each imports")
    args = parser.parse_args(argv)
    if args.order:
        modules = read_package()
        floor = floors(modules)
        for m in build_order(modules):
            types = sorted(set(m.type_uses) - set(m.uses))
            print("%-3d %-22s %s%s" % (floor[m.name], m.name, ", ".join(sorted(m.uses)),
                                       "  (types: %s)" % ", ".join(types) if types else ""))
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
            print("amalgamate: reticle.py is not the build of src/ (edit the modules, then run python3 "
                  "tools/amalgamate.py); the first differences:\n" + "\n".join(diff[:40]), file=sys.stderr)
            return 1
        print("reticle.py is the build of src/ (%d modules)" % len(module_paths()))
        return 0
    with open(target, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print("wrote reticle.py (%d lines) from %d modules" % (text.count("\n"), len(module_paths())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
