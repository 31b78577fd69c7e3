"""JSON Schema of env specs for the playground's editor, built from the registry.

Each registered component kind's ``spec_type`` (an attrs record) becomes one branch of the
layer schema; the editor completes keys and enum values from it. Unknown keys are errors
in the converter (``forbid_extra_keys``), so each record is ``additionalProperties: false``.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from envh.spec import EnvSpec, LayerSpec

if TYPE_CHECKING:
    from envh.plugins.manager import Registry

_SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}


def _doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return "" if doc == inspect.getdoc(LayerSpec) else doc


def _field_doc(doc: str, name: str) -> str:
    """The first sentence of a record's docstring that names field ``name`` (as
    ````name````), without the markup: what the editor shows beside the key."""
    for sentence in re.split(r"(?<=[.;])\s+", " ".join(doc.split())):
        if f"``{name}``" in sentence:
            return sentence.replace("``", "")
    return ""


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def type_schema(self, tp: Any) -> dict[str, Any]:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if tp in _SCALARS:
            return {"type": _SCALARS[tp]}
        if tp is LayerSpec:
            return {"$ref": "#/$defs/Layer"}
        if origin is typing.Literal:
            return {"enum": [_plain(a) for a in args]}
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.type_schema(a) for a in args]}
        if origin in (tuple, list, Sequence) or tp in (tuple, list):
            item = args[0] if args and (origin is not tuple or (len(args) == 2 and args[1] is Ellipsis)) else Any
            return {"type": "array", "items": self.type_schema(item)}
        if origin in (dict, Mapping) or tp in (dict, Mapping):
            return {"type": "object", "additionalProperties": self.type_schema(args[1]) if len(args) == 2 else {}}
        if isinstance(tp, type) and attrs.has(tp):
            return self.record(tp)
        return {}

    def record(self, cls: type) -> dict[str, Any]:
        """A ``$ref`` to ``cls``'s object schema (recursive records, e.g. chain legs, stay finite)."""
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name not in self.defs:
            self.defs[name] = {}  # placeholder: a record that contains itself refers back here
            try:
                hints = typing.get_type_hints(cls)
            except Exception:  # noqa: BLE001 - a plugin's unresolvable annotation: keys without types
                hints = {}
            props, required = {}, []
            for field in attrs.fields(cls):
                prop = dict(self.type_schema(hints.get(field.name, Any)))
                if field.default is attrs.NOTHING:
                    required.append(field.name)
                elif not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                    prop["default"] = _plain(field.default)
                described = field.metadata.get("description") or _field_doc(_doc(cls), field.name)
                if described:
                    prop["description"] = str(described)
                props[field.name] = prop
            self.defs[name] = {"type": "object", "title": cls.__name__, "description": _doc(cls),
                               "properties": props, "required": required, "additionalProperties": False}
        return {"$ref": f"#/$defs/{name}"}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)) or (isinstance(value, (int, float)) and math.isfinite(value)):
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def spec_schema(registry: Registry) -> dict[str, Any]:
    """The JSON Schema of an env spec with every registered component kind; each layer
    branch carries its kind's description, and the kind and bridge names are enums."""
    from envh.plugins.records import resolve

    build = _Builder()
    branches = []
    for name, kind in sorted(registry.component_kinds().items()):
        try:
            spec_type = resolve(kind.spec_type)  # type: ignore[arg-type]
            ref = build.record(spec_type) if isinstance(spec_type, type) and attrs.has(spec_type) else {}
        except Exception:  # noqa: BLE001 - a broken plugin's kind is offered by name only
            ref = {}
        branches.append({"allOf": [ref] if ref else [], "properties": {"kind": {"const": name}},
                         "title": name, "description": kind.description})
    root = build.record(EnvSpec)
    build.defs[f"{EnvSpec.__module__}.EnvSpec"]["properties"]["bridge"] = {
        "type": "string", "enum": sorted(registry.bridges())}
    build.defs["Layer"] = {"type": "object", "required": ["kind"], "oneOf": branches,
                           "properties": {"kind": {"type": "string", "enum": [b["title"] for b in branches]}}}
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": build.defs}
    return json.loads(json.dumps(schema, default=str))  # a plugin's odd default or doc stays plain JSON
