"""What a curriculum tunes: the parameters a bridge declares (``ParamBounds``) and what a
spec asks of them (``ParamPlan``: a range inside the bounds, a start value, a step), checked
as written (``plan_params``). ``envh_adaptive.curriculum`` decides over them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from envh import errors


@attrs.frozen(kw_only=True)
class ParamBounds:
    """A tunable parameter as a bridge declares it: integer range, safe default, and
    which direction makes the task harder (``+1``: larger is harder)."""

    name: str
    low: int
    high: int
    default: int
    harder: int = 1
    description: str = ""

    def __attrs_post_init__(self) -> None:
        if not self.low <= self.default <= self.high:
            raise errors.SpecError(f"Parameter {self.name!r}: default {self.default} outside [{self.low}, {self.high}]")
        if self.harder not in (1, -1):
            raise errors.SpecError(f"Parameter {self.name!r}: harder must be 1 or -1")


@attrs.frozen(kw_only=True)
class ParamPlan:
    """What a curriculum spec asks of one parameter: a range inside the bridge's bounds,
    a start value and the largest change per decision."""

    bounds: ParamBounds
    low: int
    high: int
    init: int
    step: int = 1

    def __attrs_post_init__(self) -> None:
        b = self.bounds
        if not (b.low <= self.low <= self.high <= b.high):
            raise errors.SpecError(f"Curriculum range [{self.low}, {self.high}] for {b.name!r} is outside the "
                                   f"bridge's bounds [{b.low}, {b.high}]")
        if not self.low <= self.init <= self.high:
            raise errors.SpecError(f"Curriculum init {self.init} for {b.name!r} is outside [{self.low}, {self.high}]")
        if self.step < 1:
            raise errors.SpecError(f"Curriculum step for {b.name!r} must be ≥ 1, got {self.step}")

    @property
    def safe(self) -> int:
        """The safe default, clipped into the planned range."""
        return min(max(self.bounds.default, self.low), self.high)


def _int(value: Any, what: str) -> int:
    """A spec's integer as written: 4.5, "4" or true is refused, not rounded or crashed on."""
    if type(value) is not int:
        raise errors.SpecError(f"Curriculum {what} must be an integer, got {value!r}")
    return value


def plan_params(declared: Mapping[str, ParamBounds], requested: Mapping[str, Mapping[str, Any]]) -> dict[str, ParamPlan]:
    """Check a spec's ``params`` against what the bridge declares; 1 to 5 of them."""
    if not 1 <= len(requested) <= 5:
        raise errors.SpecError(f"A curriculum names 1 to 5 parameters, got {len(requested)}")
    plans = {}
    for name, raw in requested.items():
        if name not in declared:
            raise errors.UnknownNameError("tunable parameter", name, list(declared))
        bounds = declared[name]
        if not isinstance(raw, Mapping):
            raise errors.SpecError(f"Curriculum parameter {name!r} takes a mapping (range, init, step), got {raw!r}")
        unknown = set(raw) - {"range", "init", "step"}
        if unknown:
            raise errors.SpecError(f"Curriculum parameter {name!r}: unknown keys {sorted(unknown)}; "
                                   "choose from range, init, step")
        span = raw.get("range", (bounds.low, bounds.high))
        if not isinstance(span, (list, tuple)) or len(span) != 2:
            raise errors.SpecError(f"Curriculum range for {name!r} is [low, high], got {span!r}")
        plans[name] = ParamPlan(bounds=bounds, low=_int(span[0], f"range of {name!r}"),
                                high=_int(span[1], f"range of {name!r}"),
                                init=_int(raw.get("init", bounds.default), f"init of {name!r}"),
                                step=_int(raw.get("step", 1), f"step of {name!r}"))
    return plans
