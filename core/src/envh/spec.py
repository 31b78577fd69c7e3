"""Declarative env specs: a bridge, its config and a stack of layers (innermost first).

A spec is data (YAML or JSON). Its canonical JSON hashes to the spec id that every
trajectory names (DESIGN invariant 4). ``make`` builds the live stack.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from . import errors
from .types import JSON

if TYPE_CHECKING:
    from .env import ActionableEnv
    from .plugins.manager import Registry


@attrs.frozen(kw_only=True)
class LayerSpec:
    """Base of every layer's config record; ``kind`` is the tag, ``id`` names the layer."""

    kind: str
    id: str | None = None


@attrs.frozen(kw_only=True)
class EnvSpec:
    """A bridge with its config and the layers wrapped around it, innermost first."""

    bridge: str
    config: dict[str, Any] = attrs.field(factory=dict)
    layers: tuple[LayerSpec, ...] = ()
    #: ``untrusted`` lowers the tier of every layer's code to the jail even when ``make``
    #: is called with ``trust="trusted"``; ``trusted`` (the default) raises nothing: only
    #: the caller of ``make`` can run spec code in-process.
    trust: Literal["trusted", "untrusted"] = "trusted"


@attrs.frozen(kw_only=True)
class BuildContext:
    """What a component factory may use while building its layer."""

    registry: Registry
    index: int
    make: Callable[[EnvSpec], ActionableEnv]
    trust: str = "untrusted"


_BRIDGE_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def load_spec_data(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Read a spec from a mapping, a JSON/YAML file path, JSON/YAML text, or a bare
    bridge name (``"toy24"`` means ``{"bridge": "toy24"}``)."""
    from .limits import MAX_SPEC_BYTES, check_weight, load_yaml

    if isinstance(source, Mapping):
        check_weight(source, "(mapping)")
        return dict(source)
    text: str
    one_line = "\n" not in str(source) and len(str(source)) < 4096  # longer is text, never a file name
    path = Path(source) if isinstance(source, Path) or one_line else None
    if path is not None and path.exists() and not path.is_dir():  # a folder named like a bridge is not a spec
        if not path.is_file():  # a FIFO would block, /dev/zero never end
            raise errors.SpecError(f"Spec {path} is not a regular file")
        with path.open("rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)  # refused without reading more than the limit
        if len(raw) > MAX_SPEC_BYTES:
            raise errors.SpecError(f"Spec {path} is larger than {MAX_SPEC_BYTES:,} bytes; split it or move "
                                   "data out of it")
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            raise errors.SpecError(f"Spec {path} is not UTF-8 text: {exc}") from None
    elif isinstance(source, str) and source.lstrip()[:1] in "{[" or (isinstance(source, str) and "\n" in source):
        text = source
    elif isinstance(source, str) and _BRIDGE_NAME.match(source):
        return {"bridge": source}  # a bare bridge name: that bridge with no layers
    else:
        raise errors.SpecError(f"Spec file {str(source)!r} does not exist.")
    import yaml

    where = str(path) if path is not None and path.exists() else "(inline spec)"
    try:
        data = load_yaml(text, where)
    except yaml.YAMLError as exc:
        detail = str(exc).replace('"<unicode string>"', where).replace("<unicode string>", where)
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise errors.SpecError(f"Spec {where} is not valid YAML/JSON{at}: {detail}") from exc
    if not isinstance(data, dict):
        raise errors.SpecError(f"A spec must be a mapping with a 'bridge' key, got {type(data).__name__}.")
    return data


def parse_spec(source: str | Path | Mapping[str, Any] | EnvSpec, registry: Registry | None = None) -> EnvSpec:
    """Structure and validate a spec; errors name the path (``$.layers[1].code``)."""
    if isinstance(source, EnvSpec):
        return source
    from .serialization import get_converter, structure_spec

    return structure_spec(load_spec_data(source), get_converter(registry))


def spec_to_data(spec: EnvSpec, registry: Registry | None = None) -> dict[str, JSON]:
    """The canonical plain-data form of a spec (every default filled in)."""
    from .serialization import get_converter

    data: dict[str, JSON] = get_converter(registry).unstructure(spec)
    return data


def canonical_json(data: JSON) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def spec_id(spec: EnvSpec | Mapping[str, Any] | str | Path, registry: Registry | None = None) -> str:
    """Content hash of the canonical spec: ``sha256`` hex of its canonical JSON."""
    parsed = parse_spec(spec, registry)
    return hashlib.sha256(canonical_json(spec_to_data(parsed, registry)).encode()).hexdigest()


TRUST_LEVELS = ("trusted", "untrusted")
#: The help of every command's ``--trust-code`` (one wording for all of them).
TRUST_CODE_HELP = ("Run the spec's own code (contract code and classes, a curriculum's coach) in this process "
                   "instead of the jail: faster, and as safe as importing a module from the spec's author. "
                   "The default jails it.")


def make(spec: EnvSpec | Mapping[str, Any] | str | Path, *, registry: Registry | None = None,
         trust: str | None = None,
         data: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = ()) -> ActionableEnv:
    """Build the env stack a spec describes: the bridge, then each layer around it.

    Code that comes with the spec (contract ``code``, a curriculum's coach) runs in the
    jail (``envh.jail``: its own process, under hard CPU, memory and process limits) unless
    *this call* says ``trust="trusted"``. A spec cannot raise its own tier: its
    ``trust: trusted`` changes nothing, its ``trust: untrusted`` (on the spec or on a
    layer) lowers it even for a trusted call. The trusted tier runs the code in this
    process with the same capability sandbox and per-call deadline, but nothing bounds its
    memory or stops a loop inside one C call: trust a spec as you would trust importing a
    module. Contract classes (``cls``) load only from installed plugins unless the call is
    trusted. Nested specs (chain legs) are built in the same tier.

    Host paths the spec names (a bridge's data files, a workspace's library: the keys each
    declares in ``data_paths``) must lie inside ``data``, ``envh.hostpaths.grant()``'s or
    ``ENVH_DATA``'s paths, unless the call is trusted (``envh.hostpaths``)."""
    from .harness import record_layer
    from .hostpaths import grants, marked_untrusted, refuse_host_paths
    from .plugins.manager import get_registry

    if trust not in (None, *TRUST_LEVELS):
        raise errors.SpecError(f"trust must be one of {', '.join(TRUST_LEVELS)} (or None: untrusted), "
                               f"got {trust!r}")
    reg = registry or get_registry()
    parsed = parse_spec(spec, reg)
    level = "trusted" if trust == "trusted" and parsed.trust != "untrusted" else "untrusted"
    spec_data = spec_to_data(parsed, reg)
    granted = grants(data)
    # a layer or leg marked untrusted lowers the path check for the whole spec (its paths reach every layer)
    refuse_host_paths(spec_data, reg, "untrusted" if marked_untrusted(spec_data) else level, granted)
    factory = reg.bridge(parsed.bridge).load()
    try:
        env: ActionableEnv = factory(**parsed.config)
    except TypeError as exc:
        raise errors.SpecError(f"Bad config for bridge {parsed.bridge!r}: {exc}") from exc
    from .jail.stacks import building

    try:
        with building(env, lambda: spec_id(parsed, reg)):  # chain legs built below share this spec's jails
            for i, layer in enumerate(parsed.layers):
                kind = reg.component_kind(layer.kind)
                ctx = BuildContext(registry=reg, index=i, make=functools.partial(make, registry=reg, trust=level, data=granted),
                                   trust=level)
                try:
                    built = kind.load()(layer, env, ctx)
                except errors.ContractCodeError as exc:
                    raise locate_code_error(exc, spec, i) from exc
                env = record_layer(built, env)  # base bridges stay known
                if getattr(env, "layer_id", None) in (None, layer.kind):
                    object.__setattr__(env, "layer_id", layer.id or f"{i}:{layer.kind}")
    except BaseException:
        env.close()
        raise
    return env


def locate_code_error(exc: errors.ContractCodeError, spec: Any, index: int) -> errors.ContractCodeError:
    """``exc`` (a line inside ``layers[index].code``) with the line in the spec file too,
    when the spec came from a YAML/JSON file; else ``exc`` unchanged."""
    path = Path(spec) if isinstance(spec, (str, Path)) and "\n" not in str(spec) else None
    if exc.lineno is None or path is None or not path.is_file():
        return exc
    import yaml

    try:
        root: Any = yaml.compose(path.read_text())
        layers = next(v for k, v in root.value if k.value == "layers")
        code = next(v for k, v in layers.value[index].value if k.value == "code")
    except Exception:  # noqa: BLE001 - best effort: the line inside the code is still reported
        return exc
    first = code.start_mark.line + (2 if code.style in ("|", ">") else 1)  # file line of the code's line 1
    return errors.ContractCodeError(
        f"{exc.message} ({path}, line {first + exc.lineno - 1}; line {exc.lineno} of layers[{index}].code)",
        lineno=exc.lineno, col=exc.col, hook=exc.hook)
