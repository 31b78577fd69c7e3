"""Read-only views of env state handed to component code (DESIGN invariant 2).

Components see data, not runtimes: a deep-frozen copy of ``get_env_state()`` that is
fetched lazily, so a hook that never looks at the state costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from . import errors
from .types import FrozenList

_SCALARS = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any, where: str = "$") -> Any:
    """Deep-freeze plain JSON data (objects become ``MappingProxyType``, arrays
    ``FrozenList``: truly read-only, not subclasses of dict or list); reject anything else."""
    t = type(value)
    if t in _SCALARS or t is FrozenList:
        return value
    if isinstance(value, (dict, MappingProxyType)):
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise errors.StateError(f"env state key {k!r} at {where} is not a string")
            out[k] = v if type(v) in _SCALARS else freeze(v, f"{where}.{k}")
        return MappingProxyType(out)
    if isinstance(value, (list, tuple)):
        return FrozenList(v if type(v) in _SCALARS else freeze(v, f"{where}[{i}]")
                          for i, v in enumerate(value))
    if isinstance(value, (str, int, float)):
        return value
    raise errors.StateError(
        f"env state at {where} is a {type(value).__name__}, not plain JSON data "
        "(dict, list, str, int, float, bool, None). Bridges must not expose runtimes.")


def check_plain(value: Any, where: str = "$") -> None:
    """Raise the ``StateError`` ``freeze`` would for ``value`` that is not plain JSON data,
    without copying it (the jailed tier sends the state as it is)."""
    t = type(value)
    if t in _SCALARS:
        return
    if isinstance(value, (dict, MappingProxyType)):
        for k, v in value.items():
            if type(k) is not str:
                raise errors.StateError(f"env state key {k!r} at {where} is not a string")
            if type(v) not in _SCALARS:
                check_plain(v, f"{where}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if type(v) not in _SCALARS:
                check_plain(v, f"{where}[{i}]")
        return
    freeze(value, where)  # raises for anything else, with the same words


class LazyState(Mapping[str, Any]):
    """A read-only mapping of ``source.get_env_state()``, fetched and frozen on first use."""

    __slots__ = ("_source", "_data")

    def __init__(self, source: Any) -> None:
        self._source = source
        self._data: Mapping[str, Any] | None = None

    def _load(self) -> Mapping[str, Any]:
        if self._data is None:
            data = freeze(self._source.get_env_state())
            if type(data) is not MappingProxyType:
                raise errors.StateError("get_env_state() must return a dict")
            self._data = data
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __contains__(self, key: object) -> bool:
        return key in self._load()

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def __repr__(self) -> str:
        return f"LazyState({self._load()!r})"
