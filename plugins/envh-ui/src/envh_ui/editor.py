"""The playground editor's server side: completion at the cursor from the spec schema,
and each validation problem placed on the line its ``$.layers[i]...`` path names.

Completion puts a marker key (or value) where the cursor is and composes the YAML
(nodes only, nothing constructed): the marker's node path, walked through the schema,
gives the keys or enum values valid there. Text that does not compose gets no
suggestions, never an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml
from envh import errors

MARK = "envh_cursor_9f3b1c"
#: the largest spec the editor completes or locates: a spec is a page of YAML, and PyYAML
#: takes about a second per 50,000 characters (completion composes up to three variants)
MAX_TEXT = 50_000
#: flow collections nested deeper than this are refused before PyYAML sees them: its
#: scanner is quadratic in the nesting ('{' * 5000 takes seconds) and its composer recursive
MAX_DEPTH = 64
_KEY = re.compile(r"(?P<lead> *(?:- +)?)(?P<prefix>[A-Za-z_][\w-]*)?")
_VALUE = re.compile(r"(?P<lead> *(?:- +)?)(?P<key>[A-Za-z_][\w-]*):(?P<space> *)(?P<prefix>[\w.-]*)")
_PLAIN = re.compile(r"[A-Za-z_][\w.-]*")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}
_PATH = re.compile(r"\$(?:\.[^.\[;\s]+|\[\d+\]|\['(?:[^'\\]|\\.)*'\])*")
_STEP = re.compile(r"\.([^.\[;\s]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]")

Path = list[str | int]


def too_deep(text: str) -> bool:
    """Whether ``text`` nests ``[``/``{`` deeper than ``MAX_DEPTH`` (brackets inside strings
    count too: an over-estimate, which only costs suggestions on absurd text)."""
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif ch in "]}" and depth:
            depth -= 1
    return False


def _compose(text: str) -> yaml.Node | None:
    if len(text) > MAX_TEXT or too_deep(text):
        return None
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)  # type: ignore[no-any-return]
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None


def _child(node: yaml.Node | None, step: str | int) -> tuple[yaml.Node | None, yaml.Node | None]:
    """(key node, value node) of ``step`` under ``node``; (None, None) when absent."""
    if isinstance(step, int) and isinstance(node, yaml.SequenceNode) and 0 <= step < len(node.value):
        item = node.value[step]
        return item, item
    if isinstance(step, str) and isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == step:
                return key, value
    return None, None


def _find_mark(root: yaml.Node) -> tuple[Path, yaml.Node] | None:
    """The path to the mapping holding the marker key, or to the marker value's key."""
    stack: list[tuple[yaml.Node, Path]] = [(root, [])]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:  # anchors and aliases make a graph, not a tree
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == MARK:
                    return path, node
                if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode) and value.value == MARK:
                    return [*path, key.value], node
                if isinstance(key, yaml.ScalarNode):
                    stack.append((value, [*path, key.value]))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, [*path, i]) for i, item in enumerate(node.value))
    return None


class SchemaWalk:
    """Resolves ``$ref`` and picks a layer's branch by its ``kind`` while walking a path."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def deref(self, s: Any) -> dict[str, Any]:
        for _ in range(64):
            if not isinstance(s, dict):
                return {}
            ref = s.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
                return s
            s = self.schema.get("$defs", {}).get(ref[len("#/$defs/"):], {})
        return {}

    def properties(self, s: dict[str, Any], node: yaml.Node | None) -> dict[str, Any]:
        """The keys valid in the object ``s`` describes, for the data ``node`` holds."""
        props: dict[str, Any] = {}
        for part in [s, *self._branch(s, node)]:
            for sub in part.get("allOf", []):
                props.update(self.deref(sub).get("properties", {}))
            props.update({k: v for k, v in part.get("properties", {}).items() if k not in props or "enum" in v})
        return props

    def _branch(self, s: dict[str, Any], node: yaml.Node | None) -> list[dict[str, Any]]:
        _, kind = _child(node, "kind")
        if "oneOf" not in s or not isinstance(kind, yaml.ScalarNode):
            return []
        return [b for b in s["oneOf"] if b.get("properties", {}).get("kind", {}).get("const") == kind.value]

    def at(self, root: yaml.Node, path: Path) -> tuple[dict[str, Any], yaml.Node | None]:
        s, node = self.deref(self.schema), root  # type: dict[str, Any], yaml.Node | None
        for step in path:
            if isinstance(step, int):
                s = self.deref(s.get("items", {}))
            else:
                props = self.properties(s, node)
                s = self.deref(props.get(step, s.get("additionalProperties", {})))
            _, node = _child(node, step)
        return s, node

    def values(self, s: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for part in [s, *(self.deref(a) for a in s.get("anyOf", []))]:
            out += part.get("enum", [])
            if "const" in part:
                out.append(part["const"])
            if part.get("type") == "boolean":
                out += [True, False]
        return list(dict.fromkeys(out))


def _summary(s: dict[str, Any], walk: SchemaWalk) -> str:
    kinds = []
    for part in [s, *(walk.deref(a) for a in s.get("anyOf", []))]:
        if "enum" in part:
            kinds.append(" | ".join(map(str, part["enum"][:8])))
        elif "type" in part:
            kinds.append(str(part.get("title") or part["type"]))
        elif "title" in part:
            kinds.append(str(part["title"]))
    return " | ".join(kinds)


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value)


def _key_insert(name: str, prop: dict[str, Any], walk: SchemaWalk, column: int) -> str:
    """``name: `` — or, for a list of records (``layers``, ``legs``, ``actions``), the key
    with its first item started on the next line, where completion goes on."""
    items = walk.deref(prop.get("items")) if prop.get("type") == "array" else {}
    if items.get("type") == "object" and ("properties" in items or "oneOf" in items):
        return f"{name}:\n{' ' * (column + 2)}- "
    return f"{name}: "


def _variants(lines: list[str], index: int, probe: str, column: int) -> Iterator[str]:
    """The text with the cursor's line replaced by ``probe``: whole; with only the rest of
    the cursor's block after it; with nothing after it (later lines may be half-written)."""
    yield "\n".join([*lines[:index], probe, *lines[index + 1:]])
    block = [probe]
    for line in lines[index + 1:]:
        if line.strip() and len(line) - len(line.lstrip(" ")) < column:
            break
        block.append(line)
    yield "\n".join([*lines[:index], *block])
    yield "\n".join([*lines[:index], probe])


def complete(text: str, offset: int, schema: dict[str, Any]) -> dict[str, Any]:
    """Suggestions at ``offset``: ``{"from", "to", "items": [{label, insert, detail}]}``;
    ``from``/``to`` is the text range an accepted item replaces."""
    none: dict[str, Any] = {"from": offset, "to": offset, "items": []}
    if not isinstance(text, str) or len(text) > MAX_TEXT or not 0 <= offset <= len(text) or too_deep(text):
        return none
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    before, after = text[start:offset], text[offset:len(text) if end < 0 else end]
    tail = re.match(r"[\w.-]*", after).group()  # type: ignore[union-attr]
    if after[len(tail):].strip():
        return none
    value = _VALUE.fullmatch(before)
    key = None if value else _KEY.fullmatch(before)
    if value:
        probe, prefix = f"{value['lead']}{value['key']}: {MARK}", value["prefix"]
        lead = value["lead"]
    elif key:
        probe, prefix, lead = f"{key['lead']}{MARK}: null", key["prefix"] or "", key["lead"]
    else:
        return none
    lines = text.split("\n")
    found = None
    for variant in dict.fromkeys(_variants(lines, text.count("\n", 0, offset), probe, len(lead))):
        root = _compose(variant)
        found = _find_mark(root) if root is not None else None
        if found is not None:
            break
    if found is None or root is None:
        return none
    path, mapping = found
    walk = SchemaWalk(schema)
    items = []
    if value:
        s, _ = walk.at(root, path)
        space = "" if value["space"] else " "
        for v in walk.values(s):
            shown = _yaml_scalar(v)
            if shown.startswith(prefix):
                doc = next((b.get("description", "") for b in walk.deref(walk.schema["$defs"].get("Layer", {}))
                            .get("oneOf", []) if path[-1] == "kind" and b.get("title") == v), "")
                items.append({"label": shown, "insert": space + shown, "detail": doc})
    else:
        s, node = walk.at(root, path)
        present = {k.value for k, _ in mapping.value if isinstance(k, yaml.ScalarNode)}
        for name, prop in walk.properties(s, node).items():
            if name.startswith(prefix) and name not in present:
                prop = walk.deref(prop)
                detail = " — ".join(p for p in (_summary(prop, walk), str(prop.get("description", ""))) if p)
                items.append({"label": name, "insert": _key_insert(name, prop, walk, len(lead)), "detail": detail})
    return {"from": offset - len(prefix), "to": offset + len(tail), "items": items}


def parse_path(path: str) -> Path:
    """``$.layers[1].code`` → ``["layers", 1, "code"]``."""
    out: Path = []
    for m in _STEP.finditer(path[1:] if path.startswith("$") else path):
        out.append(m[1] if m[1] is not None else int(m[2]) if m[2] is not None else re.sub(r"\\(.)", r"\1", m[3]))
    return out


def locate(text: str, path: Path, code_line: int | None = None) -> int | None:
    """The 1-based line of the deepest node of ``path`` present in ``text``; with
    ``code_line``, that line of a block-scalar string (contract code) at ``path``."""
    root = _compose(text)
    if root is None:
        return None
    node, at = root, root.start_mark.index
    for step in path:
        key, value = _child(node, step)
        if key is None or value is None:
            break
        node, at = value, key.start_mark.index
    else:
        if code_line is not None and isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            return text.count("\n", 0, node.start_mark.index) + 1 + code_line
    # lines as the editor counts them ('\n' only; YAML's marks also break at U+2028 and NEL)
    return text.count("\n", 0, at) + 1


def yaml_line(text: str, error: BaseException | None) -> int | None:
    """The 1-based line a YAML syntax ``error`` is about. The scanner reports where it gave
    up (the next token, often the next line): a token it could not finish (a key without
    ':', an unclosed quote) is marked where that token starts. A place on a blank line (the
    end of the text) goes to the last written line before it."""
    mark = getattr(error, "problem_mark", None)
    if isinstance(error, yaml.scanner.ScannerError) and error.context_mark is not None:
        mark = error.context_mark
    index = getattr(mark, "index", None)
    if not isinstance(index, int) or not 0 <= index <= len(text):
        return None
    lines = text.split("\n")
    line = text.count("\n", 0, index) + 1
    while line > 1 and not lines[line - 1].strip():
        line -= 1
    return line


def markers(text: str, exc: BaseException, located: str | None = None) -> list[dict[str, Any]]:
    """One ``{line, message, path}`` per problem ``exc`` reports (line ``None`` when no
    line can be named). ``located``: the path of the contract code ``exc`` came from."""
    out: list[dict[str, Any]] = []
    if not isinstance(exc, errors.EnvhError):  # a bridge's own failure names no place in the spec
        return out
    if isinstance(exc, errors.ContractCodeError) and located:
        out.append({"path": located, "message": str(exc), "line": locate(text, parse_path(located), exc.lineno)})
    elif isinstance(exc, errors.SpecError) and exc.problems:
        for problem in exc.problems:
            m = _PATH.search(problem.rsplit(" @ ", 1)[-1]) if " @ " in problem else None
            path = m.group() if m else "$"
            message = problem.replace(f" @ {path}", "", 1)
            steps = parse_path(path)
            named = re.match(r"invalid value: '(\w+)'", message)  # a record's validator names its field
            if named and locate(text, [*steps, named[1]]) != locate(text, steps):
                steps, path = [*steps, named[1]], f"{path}.{named[1]}"
            out.append({"path": path, "message": message, "line": locate(text, steps)})
    else:
        line = yaml_line(text, exc.__cause__)  # a YAML syntax error under the SpecError
        path = None
        if isinstance(exc, errors.UnknownNameError) and str(exc).startswith("Unknown bridge"):
            path, line = "$.bridge", locate(text, ["bridge"])
        out.append({"path": path, "message": str(exc), "line": line})
    return out


def contract_codes(data: Any, path: str = "$") -> Iterator[tuple[str, str, Any]]:
    """(path, code, time_limit_ms) of every contract with code, chain legs included."""
    layers = data.get("layers") if isinstance(data, dict) else None
    for i, layer in enumerate(layers if isinstance(layers, list) else []):
        if not isinstance(layer, dict):
            continue
        if layer.get("kind") == "contract" and isinstance(layer.get("code"), str):
            yield f"{path}.layers[{i}].code", layer["code"], layer.get("time_limit_ms", 250.0)
        legs = layer.get("legs") if layer.get("kind") == "chain" else None
        for j, leg in enumerate(legs if isinstance(legs, list) else []):
            yield from contract_codes(leg, f"{path}.layers[{i}].legs[{j}]")
