"""What a tool is.

A tool's record (name, schema, handler, conventions), the shared schema pieces, argument checking
and the registry the MCP layer lists and calls.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import jsonschema

from .constants import MAX_STRING_ARG
from .errors import RpcError
from .predicates import _TEXT_MATCH
from .util import _dumps


_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SESSION_ID = {"type": "string", "minLength": 1, "maxLength": 128,
               "description": "Browser session to use; omit it when one tab is connected."}
_DETAIL = {"enum": ["full"]}  # every field instead of the compact default
_CURSOR = {"type": "number", "minimum": 0,
           "description": "A cursor (ms on the daemon's clock) from an earlier result."}
_PREDICATE = {"type": "object", "description": "{kind, ...}"}
_ACTIONS = ["click", "dblclick", "hover", "focus", "blur", "fill", "type", "clear", "select",
            "check", "uncheck", "submit", "press", "scrollIntoView", "upload", "drag"]
_TARGET = {
    "type": "object",
    "description": "{testid|text|role,name|label|placeholder}",
    "properties": {
        "testid": {"type": "string", "minLength": 1},
        "text": _TEXT_MATCH,
        "role": {"type": "string", "minLength": 1},
        "name": _TEXT_MATCH,
        "label": _TEXT_MATCH,
        "placeholder": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
    "minProperties": 1,
}
_ACT_ARGS = {
    "type": "object",
    "description": "{value|text|key,modifiers|toRef|name,content,type|confirmDangerous|dialog}",
    "properties": {
        "value": {"type": ["string", "array"], "items": {"type": "string"}},
        "text": {"type": "string"},
        "key": {"type": "string"},
        "modifiers": {"type": "array", "items": {"enum": ["Meta", "Control", "Shift", "Alt"]}},
        "toRef": {"type": "string"},
        "name": {"type": "string"},
        "content": {"type": "string"},
        "type": {"type": "string"},
        "holdMs": {"type": "integer", "minimum": 0, "maximum": 30000},
        "confirmDangerous": {"type": "boolean"},
        "dialog": {"enum": ["accept", "dismiss"]}, "promptText": {"type": "string"},
    },
    "additionalProperties": False,
}
_STEP = {
    "type": "object",
    "properties": {"ref": {"type": "string"}, "target": _TARGET, "action": {"enum": _ACTIONS},
                   "args": _ACT_ARGS},
    "required": ["action"],
    "additionalProperties": False,
}


def _lean(schema: dict, top: bool = True) -> dict:
    """A schema as clients are shown it: types, enums and the required fields of the arguments;
    a nested shape in a few words (its description) instead of in full.  tools/list stays small
    (every model reads it on every turn), while validation keeps the strict schema."""
    out: Dict[str, Any] = {}
    types = schema.get("type")
    if "anyOf" in schema:
        types = [b.get("type") for b in schema["anyOf"] if b.get("type")]
    if types:
        out["type"] = types
    if "enum" in schema:
        out["enum"] = schema["enum"]
    if top:
        out["properties"] = {k: _lean(v, False) for k, v in schema.get("properties", {}).items()}
        if schema.get("required"):
            out["required"] = schema["required"]
    elif schema.get("description") and (types in ("object", "array") or "anyOf" in schema or "enum" in schema):
        out["description"] = schema["description"]
    return out


def _obj(props: dict, required: Tuple[str, ...] = ()) -> dict:
    schema = {"$schema": _SCHEMA_DIALECT, "type": "object", "properties": props,
              "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


# The schemas a process has seen pass the JSON Schema meta-schema check, as canonical JSON.  Every Hub
# builds its registry, and checking two dozen schemas costs 0.1-0.3 s on a small machine; a schema is
# data, so one that passed once passes again.  One that fails is checked, and fails, every time.
_SCHEMAS_CHECKED: Set[str] = set()


def _check_schema(schema: dict) -> None:
    """Raise jsonschema's SchemaError unless `schema` is a valid draft 2020-12 schema (once per process
    for each schema that passes)."""
    key = json.dumps(schema, sort_keys=True, default=repr)
    if key not in _SCHEMAS_CHECKED:
        jsonschema.Draft202012Validator.check_schema(schema)
        _SCHEMAS_CHECKED.add(key)


class _Tool:
    """One tool: name, one-paragraph description, schema, async handler."""

    def __init__(self, name: str, description: str, schema: dict, handler: Callable,
                 example: Optional[dict] = None, listed: bool = True, session: bool = False,
                 quiet: Tuple[str, ...] = ()) -> None:
        _check_schema(schema)
        self.name = name
        self.description = description
        self.schema = schema
        self.handler = handler
        self.example = example if example is not None else {}
        self.listed = listed
        self.needs_session = session  # the handler gets the resolved tab: (hub, session, args, ctx)
        self.quiet = quiet            # accepted spellings tools/list does not show (until|predicate)
        self.validator = jsonschema.Draft202012Validator(schema)
        self.title: Optional[str] = None          # set from _TOOL_CONVENTIONS by _build_registry
        self.annotations: Optional[dict] = None
        self.output_schema: Optional[dict] = None
        self.output_validator: Optional[Any] = None

    def convene(self, title: str, annotations: dict, output: Optional[dict]) -> None:
        """The MCP conventions clients act on: a display title, behaviour hints, and the shape of the
        answer's structuredContent (checked once here, validated per answer in check mode)."""
        self.title = title
        self.annotations = annotations
        if output is not None:
            _check_schema(output)
            self.output_schema = output
            self.output_validator = jsonschema.Draft202012Validator(output)

    def describe(self) -> dict:
        """The tool as tools/list shows it: the schema a model needs to write a call (_lean);
        the strict schema behind it still checks every call and names what it accepts."""
        shown = dict(self.schema, properties={k: v for k, v in self.schema["properties"].items()
                                              if k not in self.quiet})
        out = {"name": self.name, "description": self.description, "inputSchema": _lean(shown)}
        if self.title is not None:
            out["title"] = self.title
        if self.annotations is not None:
            out["annotations"] = self.annotations
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        return out

    def output_problem(self, result: Any) -> Optional[str]:
        """Where a successful answer's structuredContent breaks outputSchema, or None when it holds
        (an isError answer carries the error object, which no output schema describes)."""
        if self.output_validator is None or not isinstance(result, dict) or result.get("isError"):
            return None
        err = jsonschema.exceptions.best_match(self.output_validator.iter_errors(result.get("structuredContent")))
        if err is None:
            return None
        return "%s answered structuredContent that breaks its outputSchema at /%s: %s" % (
            self.name, "/".join(str(p) for p in err.absolute_path), err.message)

    def check(self, args: Any) -> None:
        """Raise RpcError(-32602) naming the failing path and accepted fields."""
        if not isinstance(args, dict):
            raise RpcError(-32602, "%s: arguments must be a JSON object, got %s" % (
                self.name, type(args).__name__), {"accepted": sorted(self.schema["properties"]),
                                                  "example": self.example})
        for key, value in _walk_strings(args):
            if len(value) > MAX_STRING_ARG:
                raise RpcError(-32602, "%s: the string at %s is %d characters; at most %d are accepted. "
                               "Nothing ran." % (self.name, key, len(value), MAX_STRING_ARG))
        err = jsonschema.exceptions.best_match(self.validator.iter_errors(args))
        if err is None:
            return
        path = "/" + "/".join(str(p) for p in err.absolute_path)
        props = _accepted_fields(self.schema, list(err.absolute_path), err)
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            what = "unknown field%s %s" % ("s" if len(extra) > 1 else "", ", ".join(repr(e) for e in extra))
        else:
            what = err.message
        msg = "%s: invalid arguments at %s: %s. Accepted fields: %s. Example: %s" % (
            self.name, path, what, ", ".join(props) or "(none)", _dumps(self.example))
        raise RpcError(-32602, msg, {"tool": self.name, "path": path, "accepted": props,
                                     "example": self.example})


def _walk_strings(value: Any, path: str = "") -> List[Tuple[str, str]]:
    out = []
    if isinstance(value, str):
        out.append((path or "/", value))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(_walk_strings(v, "%s/%s" % (path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_walk_strings(v, "%s/%d" % (path, i)))
    return out


def _accepted_fields(schema: dict, path: list, err: Any) -> List[str]:
    """The fields accepted by the object that holds the failing value."""
    if err.validator in ("additionalProperties", "required") and "properties" in err.schema:
        return list(err.schema["properties"])
    node = schema
    for part in path[:-1]:
        if isinstance(part, int):
            node = node.get("items", {})
        else:
            node = node.get("properties", {}).get(part, {})
    return list(node.get("properties", {}))


class _ToolRegistry:
    """Name -> _Tool.  tools/list, validation, the usage resource and the
    README's tool table all read from here."""

    def __init__(self) -> None:
        self._tools: Dict[str, _Tool] = {}

    def add(self, tool: _Tool) -> _Tool:
        if tool.name in self._tools:
            raise ValueError("tool %s registered twice" % tool.name)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Optional[_Tool]:
        return self._tools.get(name)

    def listed(self) -> List[_Tool]:
        return [t for t in self._tools.values() if t.listed]

    def names(self) -> List[str]:
        return [t.name for t in self.listed()]
