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


def grant(*paths: str | os.PathLike[str]) -> None:
    """Grant ``paths`` (and everything under them) to the specs this process and the
    processes it starts build from now on (added to ``ENVH_DATA``): what ``--data`` does."""
    named = [p for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p]
    named += [os.path.realpath(os.fspath(p)) for p in paths]
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


def grants(extra: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """The real paths granted: ``extra``, then ``ENVH_DATA``'s (``grant()``'s among them)."""
    named = [os.fspath(p) for p in extra] + [p for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p]
    return tuple(dict.fromkeys(os.path.realpath(os.path.expanduser(p)) for p in named))


def data_option(command: click.Command | Any) -> Any:
    """A command's ``--data PATH`` (repeatable): each path is granted (``grant``) as the
    command line is read, so the processes it starts inherit the grant too."""
    import click

    def granted(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
        grant(*value)

    return click.option("--data", multiple=True, type=click.Path(), expose_value=False, callback=granted,
                        help=DATA_HELP)(command)


def is_granted(path: str, granted: Iterable[str]) -> bool:
    """Whether ``path`` (relative: to the working directory) resolves inside a granted path."""
    real = os.path.realpath(path)
    return any(real == g or real.startswith(g.rstrip(os.sep) + os.sep) for g in granted)


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
    """The paths one declared value names: a string (a pattern: its fixed part), or each
    item of a list; anything else is returned as is and refused as not a path."""
    items = value if isinstance(value, list | tuple) else [value]
    return [fixed_part(item) if isinstance(item, str) else item for item in items]


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
        if not isinstance(value, str):
            raise errors.SpecError(f"{where} must be a path (a string), got {type(value).__name__}")
        if not is_granted(value, granted):
            raise errors.SpecError(
                f"An untrusted spec may not name a host path outside the data granted to it: {where} is "
                f"{value!r}, a path {who} opens on this host. "
                f"Grant it (envh.make(spec, data=[PATH]), --data PATH, or {DATA_ENV}=PATH), or build the spec "
                "with trust='trusted' (--trust-code) if you trust where it points.")
