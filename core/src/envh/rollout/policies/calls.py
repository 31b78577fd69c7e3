"""Turning model text into tool calls: call syntax, JSON, schema coercion, admissible commands.

Models write actions in many shapes: ``combine(0, 1, mul)``, ``combine(i=0, j=1, op="mul")``,
``{"tool": "combine", "args": {...}}``, ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
or, in single-tool text envs, a bare command (``go to desk 1``). These helpers parse them
into ``Action``s, coerce argument values toward the tool's JSON Schema (``"0"`` → 0,
``+`` → ``add`` when the enum says so) and snap free-text commands to the admissible ones.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from typing import Any

from ...types import Action, ToolSpec

#: Operator spellings small models use, tried when a value is not in the schema's enum.
ENUM_ALIASES = {"+": "add", "plus": "add", "-": "sub", "minus": "sub", "subtract": "sub", "*": "mul",
                "x": "mul", "×": "mul", "times": "mul", "multiply": "mul", "/": "div", "÷": "div",
                "divide": "div"}

_CALL = re.compile(r"^\s*`*\s*([A-Za-z_][\w.-]*)\s*(?:\((.*)\))?\s*`*\s*;?\s*$", re.S)


class ParseError(ValueError):
    """The text is not a call of one of the tools; the message is shown to the model."""



def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_strict(text: str) -> Any:
    """JSON as the standard defines it: ``NaN`` and ``Infinity`` (which Python's parser
    accepts) are refused, so no action argument holds a value no store or export can write."""
    return json.loads(text, parse_constant=_no_constant)


def text_tool(tools: list[ToolSpec]) -> tuple[ToolSpec, str] | None:
    """The (tool, string parameter) of a single-tool text env, or ``None``.

    A text env has exactly one tool whose arguments are one string (``act(command)``).
    """
    if len(tools) != 1:
        return None
    props = (tools[0].parameters or {}).get("properties") or {}
    strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
    return (tools[0], strings[0]) if len(props) == 1 and strings else None


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Name):  # a bare word: combine(0, 1, mul)
        return node.id
    if isinstance(node, (ast.List, ast.Tuple)):  # pick([a, b]): bare words inside arrays too
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    return ast.literal_eval(node)


def _split_args(inner: str) -> tuple[list[Any], dict[str, Any]]:
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
        assert isinstance(call, ast.Call)
        return [_value(a) for a in call.args], {k.arg: _value(k.value) for k in call.keywords if k.arg}
    except (SyntaxError, ValueError, AssertionError):
        pass
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for part in (p.strip() for p in inner.split(",")):
        if not part:
            continue
        name, eq, val = part.partition("=")
        raw = val.strip() if eq and name.strip().isidentifier() else part
        try:
            value: Any = ast.literal_eval(raw)
        except (SyntaxError, ValueError):
            value = raw.strip("'\"` ")
        if eq and name.strip().isidentifier():
            kwargs[name.strip()] = value
        else:
            args.append(value)
    return args, kwargs


def coerce(value: Any, schema: dict[str, Any]) -> Any:
    """Nudge a parsed value toward ``schema`` (numbers from strings, enum spellings)."""
    kind = schema.get("type")
    enum = schema.get("enum")
    if kind == "integer" and isinstance(value, (str, float)) and not isinstance(value, bool):
        try:
            as_float = float(value)
            return int(as_float) if as_float.is_integer() else value
        except ValueError:
            return value
    if kind == "number" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if enum and value not in enum and isinstance(value, str):
        low = value.strip().lower()
        for candidate in (low, ENUM_ALIASES.get(low)):
            if candidate in enum:
                return candidate
        close = difflib.get_close_matches(low, [str(e) for e in enum], n=1, cutoff=0.75)
        if close:
            return next(e for e in enum if str(e) == close[0])
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: coerce(v, props[k]) if k in props else v for k, v in value.items()}
    if kind == "array" and isinstance(value, str) and value.strip().startswith("["):
        try:  # an array sent as its JSON text: '["a", "b"]'
            decoded = loads_strict(value)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, list):
            value = decoded
    if kind == "array" and isinstance(value, tuple):
        value = list(value)
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce(v, schema["items"]) for v in value]
    return value


def build_action(name: str, args: list[Any], kwargs: dict[str, Any], tools: list[ToolSpec],
                 corrections: list[dict[str, Any]] | None = None) -> Action:
    """An ``Action`` from positional and keyword arguments, mapped by the schema's order.
    Each change to what was written (tool name case, a coerced value) is appended to
    ``corrections`` as ``{"what", "from", "to", ...}``."""
    notes = corrections if corrections is not None else []
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        lowered = {t.name.lower(): t for t in tools}
        tool = lowered.get(name.lower())
        if tool is not None:
            notes.append({"what": "tool_name", "from": name, "to": tool.name})
    if tool is None:
        raise ParseError(f"unknown tool {name[:80]!r}; the tools are {', '.join(t.name for t in tools)}")
    props = (tool.parameters or {}).get("properties") or {}
    names = list(props)
    if len(args) > len(names):
        arrays = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "array"]
        hint = f"; pass the {arrays[0]} array in brackets, e.g. {arrays[0]}=[...]" if arrays else ""
        raise ParseError(f"{tool.name}() takes {len(names)} arguments ({', '.join(names) or 'none'}); "
                         f"got {len(args)}{hint}")
    merged = dict(zip(names, args, strict=False)) | kwargs
    out = {}
    for key, value in merged.items():
        out[key] = coerce(value, props.get(key) or {})
        if out[key] != value or type(out[key]) is not type(value):
            notes.append({"what": "coerce", "arg": key, "from": value, "to": out[key]})
    return Action(tool=tool.name, args=out)


def parse_json_call(data: Any, tools: list[ToolSpec], corrections: list[dict[str, Any]] | None = None) -> Action:
    """``{"tool"|"name": ..., "args"|"arguments": {...}}`` → ``Action``."""
    if not isinstance(data, dict):
        raise ParseError("a JSON action must be an object with 'tool' and 'args'")
    name = data.get("tool") or data.get("name")
    args = data.get("args", data.get("arguments", {}))
    if isinstance(args, str):
        try:
            args = loads_strict(args) if args.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"the arguments are not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(name, str) or not isinstance(args, dict):
        raise ParseError("a JSON action needs a string 'tool' and an object 'args'")
    return build_action(name, [], args, tools, corrections)


def parse_call(text: str, tools: list[ToolSpec], corrections: list[dict[str, Any]] | None = None) -> Action:
    """Parse one call: ``name(args)``, ``name`` alone, or a JSON object."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = loads_strict(stripped)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"the action is not valid JSON: {str(exc)[:200]}") from None
        return parse_json_call(data, tools, corrections)
    match = _CALL.match(stripped)
    if not match:
        raise ParseError(f"expected a call like {example_call(tools[0]) if tools else 'tool(...)'}, "
                         f"got {stripped[:120]!r}")
    args, kwargs = _split_args(match.group(2) or "")
    return build_action(match.group(1), args, kwargs, tools, corrections)


def find_call(text: str, tools: list[ToolSpec]) -> str | None:
    """The first ``tool(...)`` of a known tool anywhere in ``text`` (lenient parsing)."""
    names = "|".join(re.escape(t.name) for t in tools)
    if not names:
        return None
    match = re.search(rf"\b({names})\s*\(", text)
    if not match:
        return None
    depth, start = 0, match.end() - 1
    for pos in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[pos], 0)
        if depth == 0:
            return text[match.start():pos + 1]
    return None


def normalise_command(command: str, admissible: list[str], cutoff: float = 0.6) -> tuple[str, float]:
    """Snap ``command`` to the closest admissible command; returns (command, similarity).

    Exact matches (ignoring case and spacing) score 1.0; otherwise difflib's ratio of the
    best candidate above ``cutoff``; with no candidate the command comes back unchanged
    with score 0.0, for the env to answer.
    """
    def norm(s: str) -> str:
        return " ".join(s.lower().strip().strip(".").split())

    wanted = norm(command)
    normed = {norm(a): a for a in admissible}
    if wanted in normed:
        return normed[wanted], 1.0
    close = difflib.get_close_matches(wanted, list(normed), n=1, cutoff=cutoff)
    if not close:
        return command, 0.0
    return normed[close[0]], difflib.SequenceMatcher(None, wanted, close[0]).ratio()


def example_value(schema: dict[str, Any], position: int = 0) -> Any:
    """A plausible value for a parameter, for prompt examples."""
    if schema.get("enum"):
        return schema["enum"][0]
    return {"integer": position, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(
        schema.get("type", "string"), "...")


def example_call(tool: ToolSpec) -> str:
    """``combine(0, 1, add)``: how a call of ``tool`` looks in the text format."""
    props = (tool.parameters or {}).get("properties") or {}
    values = [example_value(s, n) for n, s in enumerate(props.values())]
    return f"{tool.name}({', '.join(v if isinstance(v, str) and v.isidentifier() else json.dumps(v) for v in values)})"
