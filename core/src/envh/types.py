"""Frozen records that cross boundaries: between env and policy, layers, processes.

They carry no behaviour and no serialization methods; ``envh.serialization`` owns the
one converter that turns them into JSON data and back.
"""

from __future__ import annotations

from typing import Any

import attrs

JSON = Any  # plain JSON data: dict / list / str / int / float / bool / None


def _blocked(self: Any, *args: Any, **kwargs: Any) -> None:
    raise TypeError(f"{type(self).__name__} is read-only: build a new record instead")


class FrozenList(list):  # type: ignore[type-arg]
    """A list that cannot be changed in place (JSON-serialisable, equal to lists)."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _blocked  # type: ignore[assignment]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _blocked  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (FrozenList, (list(self),))


class FrozenArgs(dict):  # type: ignore[type-arg]
    """A dict that cannot be changed in place, so records stay immutable all the way down
    (JSON-serialisable, equal to dicts, picklable)."""

    __slots__ = ()
    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _blocked  # type: ignore[assignment]
    __ior__ = _blocked  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (FrozenArgs, (dict(self),))


def frozen(value: Any) -> Any:
    """Deep read-only copy of JSON-like data (dicts and lists become frozen subclasses)."""
    t = type(value)
    if t is FrozenArgs or t is FrozenList:
        return value
    if isinstance(value, dict):
        for v in value.values():
            if type(v) not in _PLAIN:
                return FrozenArgs({k: frozen(v) for k, v in value.items()})
        return FrozenArgs(value)
    if isinstance(value, (list, tuple)):
        return FrozenList([frozen(v) for v in value])
    return value


_PLAIN = frozenset({str, int, float, bool, type(None)})


@attrs.frozen(kw_only=True)
class TaskRef:
    """Which task an episode plays: kept apart from the random seed (DESIGN invariant 5)."""

    suite: str
    split: str = "default"
    instance_id: str

    def __str__(self) -> str:
        return f"{self.suite}/{self.split}/{self.instance_id}"


@attrs.frozen(kw_only=True)
class Action:
    """A tool call proposed by a policy: ``tool`` names one of ``env.tools()``."""

    tool: str
    args: dict[str, Any] = attrs.field(factory=FrozenArgs, converter=frozen)


@attrs.frozen(kw_only=True)
class Block:
    """Returned by a contract's action filter to refuse an action; ``reason`` is shown."""

    reason: str


@attrs.frozen(kw_only=True)
class Observation:
    """What the policy sees: ``text`` for language models, ``data`` for structure."""

    text: str
    data: dict[str, Any] = attrs.field(factory=FrozenArgs, converter=frozen)


@attrs.frozen(kw_only=True)
class EnvResponse:
    """Result of one step. ``info["error"]`` is set when the action was a policy mistake;
    ``info["envh"]`` lists each layer's effect, innermost first."""

    observation: Observation
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ResetResult:
    """Result of ``reset()``: the first observation of the episode."""

    observation: Observation
    info: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class EvaluationResult:
    """The verifier's verdict. Only bridges (and chain, combining them) produce it."""

    success: bool
    score: float = 0.0
    metrics: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolSpec:
    """One tool: ``parameters`` is a JSON Schema object (enums, arrays, nesting allowed)."""

    name: str
    description: str
    parameters: dict[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
