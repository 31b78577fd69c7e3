"""Fast checks of tool-call arguments against a tool's JSON Schema.

A full JSON Schema validator costs tens of microseconds per call; this compiles the
subset tools use (types, required, enum, additionalProperties, nested objects and
arrays, string length) into closures once per tool, so every bridge gets bad-action
handling for a few hundred nanoseconds a step.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from .types import ToolSpec

Checker = Callable[[Any, str], "str | None"]

#: Strings longer than this in a tool call are rejected (a policy can emit megabytes).
MAX_STRING_CHARS = 200_000

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict, MappingProxyType),  # Action.args and nested objects are read-only views
    "null": (type(None),),
}


def _compile(schema: dict[str, Any]) -> Checker:
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    allowed = tuple(t for n in names for t in _TYPES.get(n, ()))
    no_bool = bool(names) and "boolean" not in names
    enum = schema.get("enum")
    max_len = min(schema.get("maxLength", MAX_STRING_CHARS), MAX_STRING_CHARS)
    props = {k: _compile(v) for k, v in (schema.get("properties") or {}).items()}
    required = list(schema.get("required") or [])
    closed = schema.get("additionalProperties") is False
    items = _compile(schema["items"]) if isinstance(schema.get("items"), dict) else None

    def check(value: Any, where: str) -> str | None:
        if allowed and (not isinstance(value, allowed) or (no_bool and isinstance(value, bool))):
            return f"{where} must be {' or '.join(names)}, got {_json_type(value)}"
        if enum is not None and value not in enum:
            return f"{where} must be one of {enum}, got {value!r:.80}"
        if isinstance(value, str) and len(value) > max_len:
            return f"{where} is {len(value)} characters long; the limit is {max_len}"
        if isinstance(value, (dict, MappingProxyType)):
            for key in required:
                if key not in value:
                    return f"{where} is missing required argument {key!r}"
            for key, item in value.items():
                sub = props.get(key)
                if sub is None:
                    if closed:
                        return f"{where} has unknown argument {key!r}; expected {sorted(props)}"
                    continue
                problem = sub(item, f"{where}.{key}")
                if problem:
                    return problem
        elif items is not None and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                problem = items(item, f"{where}[{i}]")
                if problem:
                    return problem
        return None

    return check


def _json_type(value: Any) -> str:
    """The JSON name of a value's type: what a policy knows, not our Python classes."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    for name in ("integer", "number", "string", "array", "object"):
        if isinstance(value, _TYPES[name]):
            return name
    return type(value).__name__


def compile_tools(tools: list[ToolSpec]) -> dict[str, Checker]:
    """Map tool name → argument checker returning ``None`` or a message for the policy."""
    out: dict[str, Checker] = {}
    for tool in tools:
        schema = dict(tool.parameters or {})
        schema.setdefault("type", "object")
        out[tool.name] = _compile(schema)
    return out
