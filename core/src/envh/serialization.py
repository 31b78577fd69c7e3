"""The one cattrs converter: records ⇄ plain JSON data.

Layer specs are a tagged union on ``kind``, configured from the registry after plugins
load; unknown keys are errors carrying cattrs' path (``$.layers[1].code``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from . import errors
from .spec import EnvSpec, LayerSpec

if TYPE_CHECKING:
    from .plugins.manager import Registry

_converters: dict[int, cattrs.Converter] = {}


def make_converter(registry: Registry | None = None) -> cattrs.Converter:
    """A converter that knows every layer kind the registry offers."""
    from .plugins.manager import get_registry
    from .plugins.records import resolve

    reg = registry or get_registry()
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)

    def structure_layer(data: Any, _: type) -> LayerSpec:
        if not isinstance(data, dict):
            raise TypeError(f"a layer must be a mapping with a 'kind' key, got {type(data).__name__}")
        if "kind" not in data:
            raise KeyError("kind")
        kind = reg.component_kind(str(data["kind"]))
        spec_type = resolve(kind.spec_type)  # type: ignore[arg-type]
        return conv.structure(data, spec_type)  # type: ignore[no-any-return, arg-type]

    conv.register_structure_hook_func(lambda t: t is LayerSpec, structure_layer)
    conv.register_unstructure_hook_func(
        lambda t: t is LayerSpec, lambda obj: conv.unstructure(obj, unstructure_as=type(obj)))
    reg.configure_converter(conv)
    return conv


def get_converter(registry: Registry | None = None) -> cattrs.Converter:
    from .plugins.manager import get_registry

    reg = registry or get_registry()
    conv = _converters.get(id(reg))
    if conv is None:
        conv = _converters[id(reg)] = make_converter(reg)
    return conv


def _format(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, errors.UnknownNameError):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"required key {exc.args[0]!r} missing" if exc.args else "required key missing"
    if isinstance(exc, (TypeError, ValueError)):
        if type_ is None:  # an attrs validator of the record itself
            return f"invalid value: {exc}"
        name = getattr(type_, "__name__", repr(type_))
        return f"invalid value for type {name}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _problems(exc: BaseException, path: str) -> list[str]:
    """cattrs' ``transform_error`` with one line per unknown key, at that key's path
    (``unknown key 'cod' @ $.layers[1].cod; valid keys: ...``)."""
    if isinstance(exc, ForbiddenExtraKeysError):
        valid = ", ".join(sorted(a.name for a in attrs.fields(exc.cl))) if attrs.has(exc.cl) else "?"
        return [f"unknown key {key!r} @ {path}.{key}; valid keys: {valid}" for key in sorted(exc.extra_fields)]
    if not isinstance(exc, (ClassValidationError, IterableValidationError)):
        return cattrs.transform_error(exc, path=path, format_exception=_format)
    out: list[str] = []
    with_notes, without = exc.group_exceptions()
    for sub, note in with_notes:
        sub_path = f"{path}[{note.index!r}]" if isinstance(exc, IterableValidationError) else f"{path}.{note.name}"  # type: ignore[union-attr]
        if isinstance(sub, (ClassValidationError, IterableValidationError, ForbiddenExtraKeysError)):
            out += _problems(sub, sub_path)
        else:
            out.append(f"{_format(sub, note.type)} @ {sub_path}")
    for sub in without:
        out += _problems(sub, path) if isinstance(sub, ForbiddenExtraKeysError) else [f"{_format(sub, None)} @ {path}"]
    return out


def structure_spec(data: dict[str, Any], conv: cattrs.Converter) -> EnvSpec:
    try:
        return conv.structure(data, EnvSpec)
    except (ClassValidationError, IterableValidationError) as exc:
        problems = _problems(exc, "$")
        raise errors.SpecError("Invalid env spec:", problems) from exc
    except errors.EnvhError:
        raise
    except Exception as exc:  # noqa: BLE001 - report anything cattrs raises as a spec error
        raise errors.SpecError(f"Invalid env spec: {exc!r}") from exc
