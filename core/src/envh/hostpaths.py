"""Host paths a spec names, and the caller's grant that lets it.

A bridge reads the files its config names, and some component kinds read or write a
path one of their options names (a curriculum's ``audit`` log, a workspace's
``library``): each declares those keys in its ``data_paths`` (``"{key}"``). A spec is data
from anywhere, so a spec built as untrusted (``envh.make``'s default) may name such a path
only inside what the *caller* granted: ``envh.make(spec, data=[...])``, ``envh run
--data PATH``, or the ``ENVH_DATA`` variable (paths joined by ``:``) for every command. A
spec cannot grant itself anything. A trusted call (``trust="trusted"``, ``--trust-code``)
may name any path. Paths a bridge takes from its own variables (``OFFICEQA_DATA``,
``ALFWORLD_DATA``) are the host's, not the spec's, and need no grant.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from . import errors

if TYPE_CHECKING:
    import click

#: The variable that grants spec-named host paths to every command (``os.pathsep``-joined).
DATA_ENV = "ENVH_DATA"
#: The help of every command's ``--data``.
DATA_HELP = ("A host file or directory the spec may name (a bridge's data, a workspace's library); repeat it "
             f"for more. An untrusted spec may name no other host path ({DATA_ENV} grants paths to every command).")


def _paths(data: Any) -> list[str]:
    """``data`` as paths: one path (a string or ``PathLike``) or several; an empty one, or
    one that resolves to ``/`` (every host path), is a ``SpecError``."""
    items = [data] if isinstance(data, str | bytes | os.PathLike) else list(data)
    out = []
    for item in items:
        path = os.fsdecode(item) if isinstance(item, str | bytes | os.PathLike) else None
        if not path or "\0" in path:
            raise errors.SpecError(f"A data grant names a host path (a file or directory), not {item!r}.")
        real = os.path.realpath(os.path.expanduser(path))
        if real == os.sep:
            raise errors.SpecError(f"Granting {path!r} would grant every host path: build the spec with "
                                   "trust='trusted' (--trust-code) if you trust where it points.")
        out.append(real)
    return out


def grant(*paths: str | os.PathLike[str]) -> None:
    """Grant ``paths`` (and everything under them) to the specs this process and the
    processes it starts build from now on (added to ``ENVH_DATA``): what ``--data`` does."""
    named = [p for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p] + _paths(paths)
    os.environ[DATA_ENV] = os.pathsep.join(dict.fromkeys(named))


@contextlib.contextmanager
def granted(*paths: str | os.PathLike[str]) -> Iterator[None]:
    """``grant(*paths)`` for the block only (``ENVH_DATA`` as it was afterwards): a test's
    fixture data, granted to the specs the tests build as a user's ``--data`` would."""
    before = os.environ.get(DATA_ENV)
    grant(*paths)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DATA_ENV, None)
        else:
            os.environ[DATA_ENV] = before


def grants(extra: Any = ()) -> tuple[str, ...]:
    """The real paths granted: ``extra`` (one path or several), then ``ENVH_DATA``'s
    (``grant()``'s among them; its empty entries grant nothing)."""
    named = _paths(extra) + _paths([p for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p])
    return tuple(dict.fromkeys(named))


def data_option(command: click.Command | Any) -> Any:
    """A command's ``--data PATH`` (repeatable): each path is granted (``grant``) as the
    command line is read, so the processes it starts inherit the grant too."""
    import click

    def granted(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
        grant(*value)

    return click.option("--data", multiple=True, type=click.Path(), expose_value=False, callback=granted,
                        help=DATA_HELP)(command)


def is_granted(path: str, granted: Iterable[str]) -> bool:
    """Whether ``path`` (relative: to the working directory) resolves inside a granted path
    (real paths, as ``grants`` gives them)."""
    try:
        real = os.path.realpath(path)
    except ValueError:  # a NUL byte
        return False
    return any(g and (real == g or real.startswith(g.rstrip(os.sep) + os.sep)) for g in granted)


def marked_untrusted(data: Any) -> bool:
    """Whether any part of a spec's data is marked ``trust: untrusted`` (the spec, a layer,
    a chain leg): that lowers the whole spec's host-path check, whoever calls."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            if value.get("trust") == "untrusted":
                return True
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return False


def declared_keys(info: Any) -> tuple[str, ...]:
    """The config or layer keys a contribution's ``data_paths`` name (``"{key}"``,
    ``"rw:{key}"``): values there are paths on this machine, whatever they look like."""
    keys = []
    for entry in getattr(info, "data_paths", ()):
        entry = str(entry).removeprefix("rw:")
        if entry.startswith("{") and entry.endswith("}"):
            keys.append(entry[1:-1])
    return tuple(keys)


def fixed_part(path: str) -> str:
    """``path``, or where a pattern's matches all lie (WebArena's ``config_files``): the
    components before the first with a glob character."""
    if not any(c in path for c in "*?["):
        return path
    parts = path.split(os.sep)
    fixed = os.sep.join(parts[:next(i for i, p in enumerate(parts) if any(c in p for c in "*?["))])
    return fixed or (os.sep if path.startswith(os.sep) else "")


def _values(value: Any) -> list[Any]:
    """The paths one declared value names: a string, or each item of a list (rows given
    inline, mappings, name no path); anything else is returned as is and refused as not a
    path."""
    if not isinstance(value, list | tuple):
        return [value]
    return [item for item in value if not isinstance(item, Mapping)]


def spec_paths(data: Any, registry: Any = None, where: str = "$") -> list[tuple[str, Any, str]]:
    """``(where, value, who)`` for every host path spec ``data`` names through a key its
    bridge or a layer's kind declares (``data_paths``), chain legs and nested specs
    included. ``value`` is the path as written (or a non-string, which is no path)."""
    from .plugins.manager import get_registry

    reg = registry or get_registry()
    found: list[tuple[str, Any, str]] = []

    def declared(find: Any, name: Any) -> tuple[str, ...]:
        try:
            return declared_keys(find(str(name)))
        except Exception:  # noqa: BLE001 - an unknown name fails where the spec is parsed, with its cause
            return ()

    def walk(value: Any, where: str) -> None:
        if isinstance(value, Mapping):
            if "bridge" in value and isinstance(value.get("config"), Mapping):
                for key in declared(reg.bridge, value["bridge"]):
                    if value["config"].get(key) is not None:
                        for item in _values(value["config"][key]):
                            found.append((f"{where}.config.{key}", item, f"bridge {value['bridge']!r}"))
            if isinstance(value.get("kind"), str):  # a layer, wherever it stands
                for key in declared(reg.component_kind, value["kind"]):
                    if value.get(key) is not None:
                        for item in _values(value[key]):
                            found.append((f"{where}.{key}", item, f"a {value['kind']} layer"))
            for key, item in value.items():
                walk(item, f"{where}.{key}")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")

    walk(data, where)
    return found


def host_paths(data: Any, where: str = "$", registry: Any = None) -> list[str]:
    """Where spec ``data`` (layers, chain legs and nested specs included) names a host path."""
    return list(dict.fromkeys(w for w, _, _ in spec_paths(data, registry, where)))


def refuse_host_paths(data: Any, registry: Any, trust: str, data_grants: Iterable[str] = ()) -> None:
    """Raise ``SpecError`` when spec ``data`` built in tier ``trust`` names a host path
    outside the granted ones (``grants(data_grants)``)."""
    if trust == "trusted":  # anything else, a typo included, is held to the grant
        return
    granted = grants(data_grants)
    for where, value, who in spec_paths(data, registry):
        if not isinstance(value, str) or "\0" in value:
            raise errors.SpecError(f"{where} must be a host path (a string), got {type(value).__name__}")
        if value.startswith("~") or "$" in value:
            raise errors.SpecError(f"{where} ({value!r}): a host path an untrusted spec names may not start with ~ "
                                   "or hold a $variable: the bridge would expand them after this check.")
        fixed = fixed_part(value)
        if fixed != value and ".." in value.split(os.sep):
            raise errors.SpecError(f"{where} ({value!r}): a host path pattern an untrusted spec names may not "
                                   "hold '..': its matches would climb out of the directory it starts in.")
        if not is_granted(fixed, granted):
            raise errors.SpecError(
                f"An untrusted spec may not name a host path outside the data granted to it: {where} is "
                f"{value!r}, a path {who} opens on this host. "
                f"Grant it (envh.make(spec, data=[PATH]), --data PATH, or {DATA_ENV}=PATH), or build the spec "
                "with trust='trusted' (--trust-code) if you trust where it points.")
