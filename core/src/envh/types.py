"""Frozen records that cross boundaries: between env and policy, layers, processes.

They carry no behaviour and no serialization methods; ``envh.serialization`` owns the
one converter that turns them into JSON data and back. Payloads are truly immutable
(``MappingProxyType`` and tuples, never dict or list subclasses): nothing a component or
contract hook does to a record changes what the base env executes or what the
trajectory records (DESIGN invariant 3).
"""

from __future__ import annotations

import copyreg
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

JSON = Any  # plain JSON data: dict / list / str / int / float / bool / None


class FrozenList(tuple):  # type: ignore[type-arg]
    """An immutable JSON array: a tuple (no method mutates it, not even ``list.append``
    called on it) that still compares equal to the list it was made from."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return tuple.__eq__(self, tuple(other))
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return repr(list(self))


_PLAIN = frozenset({str, int, float, bool, type(None)})
_FROZEN = frozenset({MappingProxyType, FrozenList})


def frozen(value: Any) -> Any:
    """Deep read-only copy of JSON-like data: mappings become ``MappingProxyType`` over a
    private dict, lists and tuples become ``FrozenList``. Neither is a dict or list
    subclass, so no inherited method (``dict.update(args, ...)``) can change them."""
    t = type(value)
    if t in _PLAIN or t in _FROZEN:
        return value
    if t is dict or (t is not list and t is not tuple and isinstance(value, Mapping)):
        return MappingProxyType({k: v if type(v) in _PLAIN else frozen(v) for k, v in value.items()})
    if t is list or t is tuple or isinstance(value, (list, tuple)):
        return FrozenList([v if type(v) in _PLAIN else frozen(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable JSON copy (dicts and lists) of ``frozen`` data, for ``json.dumps``
    and for code that builds a new value from an old one."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is MappingProxyType or t is dict or (t is not FrozenList and isinstance(value, Mapping)):
        return {k: v if type(v) in _PLAIN else thaw(v) for k, v in value.items()}
    if t is FrozenList or isinstance(value, (list, tuple)):
        return [v if type(v) in _PLAIN else thaw(v) for v in value]
    return value


def _proxy(data: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(data)


# pickling and deepcopy of records (process pools, Ray) rebuild the read-only view
copyreg.pickle(MappingProxyType, lambda m: (_proxy, (dict(m),)))  # type: ignore[arg-type]
_EMPTY: MappingProxyType[str, Any] = MappingProxyType({})


@attrs.frozen(kw_only=True)
class TaskRef:
    """Which task an episode plays: kept apart from the random seed (DESIGN invariant 5)."""

    suite: str
    split: str = "default"
    instance_id: str
    #: A label to filter and stratify by (ALFWorld's task type, SWE-bench's repository).
    #: Description, not identity: left out of equality, hashing and ``str()``, and out of
    #: recorded JSON when None, so refs with and without it name the same task.
    group: str | None = attrs.field(default=None, eq=False)

    def __str__(self) -> str:
        return f"{self.suite}/{self.split}/{self.instance_id}"


@attrs.frozen(kw_only=True)
class Action:
    """A tool call proposed by a policy: ``tool`` names one of ``env.tools()``."""

    tool: str
    args: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=frozen)


@attrs.frozen(kw_only=True)
class Block:
    """Returned by a contract's action filter to refuse an action; ``reason`` is shown."""

    reason: str


@attrs.frozen(kw_only=True)
class Answer:
    """Returned by a layer's ``answer_action`` to answer an action itself: the policy sees
    ``observation`` and the inner env is not stepped. The step's reward is 0 and it ends
    nothing, whatever the layer would like: only a base env's step earns a reward.
    ``info`` is added to the step's info (``"error"`` marks a policy mistake, as a bridge's
    does; ``"envh"`` is core's and refused); ``effect`` adds keys to this layer's entry in
    ``info["envh"]`` (its ``action`` is ``"answered"``)."""

    observation: Observation
    info: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=frozen)
    effect: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=frozen)


@attrs.frozen(kw_only=True)
class Observation:
    """What the policy sees: ``text`` for language models, ``data`` for structure."""

    text: str
    data: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=frozen)


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


_new = object.__new__


def _slot_setters(cls: type, *names: str) -> tuple[Any, ...]:
    """The slot descriptors' setters of a frozen record: they set a field of a new
    instance ~30 % faster than ``object.__setattr__`` (the step path builds records)."""
    return tuple(vars(cls)[name].__set__ for name in names)


_OBS_TEXT, _OBS_DATA = _slot_setters(Observation, "text", "data")
_R_OBS, _R_REWARD, _R_TERM, _R_TRUNC, _R_INFO = _slot_setters(
    EnvResponse, "observation", "reward", "terminated", "truncated", "info")


def _observation(text: str, data: Mapping[str, Any], _new: Any = _new, _cls: type = Observation,
                 _text: Any = _OBS_TEXT, _data: Any = _OBS_DATA) -> Observation:
    """``Observation(text=text, data=data)`` for ``data`` taken from another record (so
    already frozen), skipping the keyword parsing and converter: layers that rewrite an
    observation's text do this on every step."""
    obs = _new(_cls)
    _text(obs, text)
    _data(obs, data)
    return obs  # type: ignore[no-any-return]


def _response(observation: Observation, reward: float, terminated: bool, truncated: bool,
              info: dict[str, Any], _new: Any = _new, _cls: type = EnvResponse, _obs: Any = _R_OBS,
              _reward: Any = _R_REWARD, _term: Any = _R_TERM, _trunc: Any = _R_TRUNC,
              _info: Any = _R_INFO) -> EnvResponse:
    """``EnvResponse(...)`` from the fields of a response already checked, on the step path."""
    resp = _new(_cls)
    _obs(resp, observation)
    _reward(resp, reward)
    _term(resp, terminated)
    _trunc(resp, truncated)
    _info(resp, info)
    return resp  # type: ignore[no-any-return]
