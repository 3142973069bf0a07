"""Errors in one home (src/reticle/errors.py): every error class Reticle raises on purpose lives there,
every tool error carries one of the stable codes of _ERROR_CODES (callers branch on the code, never on
the prose), and the README's reference lists exactly those codes."""
import ast
import asyncio
import json
import os
import re

import reticle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "src", "reticle")


def _modules():
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
                yield name, ast.parse(f.read())


def test_every_error_class_lives_in_errors_py():
    homes = {}
    for name, tree in _modules():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & {"Exception", "ValueError", "ReticleError", "ToolError"} or node.name.endswith("Error"):
                    homes[node.name] = name
    assert homes and set(homes.values()) == {"errors.py"}, homes


def test_every_tool_error_names_a_known_code():
    """Each ToolError made in the package passes `code=`: a literal of _ERROR_CODES, or the code of the error
    or answer it passes on; each subclass's own code is one of them too."""
    known = set(reticle._ERROR_CODES)
    found, offences = 0, []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ToolError":
                found += 1
                code = next((k.value for k in node.keywords if k.arg == "code"), None)
                if code is None:
                    offences.append("%s:%d makes a ToolError without a code" % (name, node.lineno))
                elif isinstance(code, ast.Constant) and code.value not in known:
                    offences.append("%s:%d uses the unknown code %r" % (name, node.lineno, code.value))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (isinstance(item, ast.Assign) and [getattr(t, "id", None) for t in item.targets] == ["code"]
                            and isinstance(item.value, ast.Constant) and item.value.value not in known):
                        offences.append("%s: class %s has the unknown code %r" % (name, node.name, item.value.value))
    assert found > 80 and offences == [], "\n".join(offences)
    assert set(reticle._PAGE_ERROR_CODES) <= known


def test_the_readme_lists_exactly_the_codes():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    table = readme.split("#### Error codes", 1)[1].split("\n\n", 3)[2]
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert listed == list(reticle._ERROR_CODES)


def test_a_tool_error_reaches_the_client_with_its_code(make_hub):
    """Through the hub's own call path, as an MCP client meets it: no tab yet, then a call with arguments
    the schema cannot refuse."""
    hub = make_hub()
    ctx = reticle._CallContext("test", "test")

    async def run():
        no_tab = await hub.call_tool("reticle_snapshot", {}, ctx)
        return no_tab

    result = asyncio.run(run())
    data = json.loads(result["content"][0]["text"])
    assert result["isError"] is True and data["code"] == "no_tab", data
    assert "error" in data and data["code"] in reticle._ERROR_CODES
