"""Targets of the designer loop and how a measured batch of rollouts meets them.

``sr:0.4-0.6`` (success-rate band), ``steps:25-35`` (mean-steps band),
``beats-baseline:0.2`` (success rate at least 0.2 above the baseline's; a negative
value asks for that much below), ``weakness:"submits without running tests"`` or
``weakness:repeats:3`` (a predicate over trajectories, see ``weakness.py``: the share of
episodes where the behaviour shows *and* the episode fails must rise by at least
``WEAKNESS_MARGIN`` over the baseline's, while the success rate stays at or above
``SUCCESS_FLOOR``). Absolute targets (``sr``, ``steps``) are judged by the band validator,
and an accepted candidate must also have moved from its base towards the band (``differs.py``);
relative ones (``beats-baseline``, ``weakness``) by the paired lift test
(``stats.LiftTest``: base and candidate play the same seeds), so a candidate that changes
nothing is accepted at most ``stats.ALPHA_RIG`` of the time per task. Each still has a band
(the base's estimate plus the lift) for the designer's hints; a band narrower than the
validator's minimum width is reported as unreachable instead of tried.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import attrs
from envh import errors

from .stats import MIN_WIDTH

Metric = Literal["success_rate", "mean_steps", "weakness_rate"]
WEAKNESS_MARGIN = 0.2
SUCCESS_FLOOR = 0.1


@attrs.frozen(kw_only=True)
class Target:
    """A parsed target; ``band(baseline)`` gives the concrete band on ``metric``."""

    kind: Literal["sr", "steps", "beats-baseline", "weakness"]
    lo: float = 0.0
    hi: float = 1.0
    delta: float = 0.0
    text: str = ""

    @property
    def metric(self) -> Metric:
        return {"steps": "mean_steps", "weakness": "weakness_rate"}.get(self.kind, "success_rate")  # type: ignore[return-value]

    def rises(self, direction: str | None) -> bool:
        """Whether ``direction`` moves this target's metric up (pressure raises a weakness's
        rate and mean steps; scaffolding raises the success rate)."""
        if self.kind == "weakness":
            return direction == "pressure"
        return (direction == "scaffold") == (self.metric == "success_rate")

    def reachable(self, band: tuple[float, float]) -> bool:
        """A rate band narrower than the validator's minimum width cannot be judged."""
        return not self.binary or band[1] - band[0] >= MIN_WIDTH - 1e-9

    @property
    def relative(self) -> bool:
        """Judged against the base by the paired lift test (``stats.LiftTest``), not a band."""
        return self.kind in ("beats-baseline", "weakness")

    @property
    def lift(self) -> float:
        """The lift a relative target asks for, on its metric (negative: that much lower)."""
        return WEAKNESS_MARGIN if self.kind == "weakness" else self.delta

    @property
    def binary(self) -> bool:
        return self.metric != "mean_steps"

    def band(self, baseline: dict[str, Any]) -> tuple[float, float]:
        """The band the measured metric must fall in, given the baseline statistics."""
        if self.kind in ("sr", "steps"):
            return self.lo, self.hi
        base = float(baseline.get("success_rate", 0.0))
        if self.kind == "beats-baseline":
            if self.delta >= 0:
                return min(1.0, base + self.delta), 1.0
            return 0.0, max(0.0, base + self.delta)
        weak = float(baseline.get("weakness_rate", 0.0))
        return min(1.0, weak + WEAKNESS_MARGIN), 1.0  # weakness

    def direction(self, baseline: dict[str, Any]) -> Literal["scaffold", "pressure"] | None:
        """Make the task easier (scaffold) or harder (pressure); ``None``: already there."""
        if self.relative:  # the candidate must differ from its base: never there already
            return "pressure" if self.kind == "weakness" or self.delta < 0 else "scaffold"
        value = float(baseline.get(self.metric, 0.0))
        lo, hi = self.band(baseline)
        if lo <= value <= hi:
            return None
        if self.kind == "weakness":
            return "pressure"
        too_low = value < lo
        return ("scaffold" if too_low else "pressure") if self.binary else ("pressure" if too_low else "scaffold")

    def describe(self) -> str:
        if self.kind == "sr":
            return f"success rate in [{self.lo:g}, {self.hi:g}]"
        if self.kind == "steps":
            return f"mean steps in [{self.lo:g}, {self.hi:g}]"
        if self.kind == "beats-baseline":
            return (f"success rate at least {self.delta:+g} from the base's (base and candidate paired by "
                    "episode seed; the lift test's error rates are stated)")
        return (f"the weakness {self.text!r} bites measurably more often (the share of episodes where "
                f"it shows and the episode fails rises by >= {WEAKNESS_MARGIN:g} over the base's on the same "
                f"seeds, by the paired lift test; success stays >= {SUCCESS_FLOOR:g})")

    def __str__(self) -> str:
        if self.kind in ("sr", "steps"):
            return f"{self.kind}:{self.lo:g}-{self.hi:g}"
        if self.kind == "beats-baseline":
            return f"beats-baseline:{self.delta:g}"
        return f"weakness:{self.text!r}"


_NUM = r"[-+]?\d+(?:\.\d+)?"


def parse_target(text: str | Target) -> Target:
    """``"sr:0.4-0.6"`` → ``Target``; errors say what a valid target looks like."""
    if isinstance(text, Target):
        return text
    kind, _, rest = str(text).partition(":")
    kind, rest = kind.strip(), rest.strip()
    if kind in ("sr", "steps"):
        m = re.fullmatch(rf"({_NUM})\s*-\s*({_NUM})", rest)
        if m:
            lo, hi = float(m.group(1)), float(m.group(2))
            if (kind == "steps" and lo < hi) or (kind == "sr" and 0 <= lo <= hi <= 1 and hi - lo >= MIN_WIDTH - 1e-9):
                return Target(kind=kind, lo=lo, hi=hi)  # type: ignore[arg-type]
    elif kind == "beats-baseline" and re.fullmatch(_NUM, rest):
        return Target(kind="beats-baseline", delta=float(rest))
    elif kind == "weakness" and rest.strip("\"'"):
        return Target(kind="weakness", text=rest.strip("\"'"))
    raise errors.EnvhError(
        f"Bad target {text!r}. Use sr:LO-HI (0 <= LO <= HI <= 1, HI - LO >= {MIN_WIDTH:g}: a narrower "
        "band needs hundreds of rollouts per verdict), steps:LO-HI (LO < HI), "
        "beats-baseline:DELTA or weakness:\"plain words\".")
