"""What a designer is given and what it returns.

A designer is any object with ``propose(ctx) -> Proposal | None`` (``None``: it has
nothing left to try). ``ctx`` carries everything the loop knows about the task: the
current spec, tools and state schema, baseline statistics and trajectories, the target
and its band, and every previous attempt with its measured result or the typed reason it
was rejected. Designers keep no hidden state between rounds, so a resumed run makes the
same proposals from the same journal.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import attrs
from envh import Registry, TaskRef, ToolSpec
from envh.rollout import Trajectory

from ..targets import Target

Verdict = Literal["accepted", "rejected", "invalid"]


@attrs.frozen(kw_only=True)
class Attempt:
    """One candidate and what became of it. ``invalid``: failed the free cascade
    (``cascade`` holds stage and message); otherwise ``result`` holds the validation
    statistics with ``decision`` (below / in / above the band)."""

    round: int
    layers: list[dict[str, Any]]
    diagnosis: str = ""
    rationale: str = ""
    meta: dict[str, Any] = attrs.field(factory=dict)
    verdict: Verdict
    reason: str = ""
    cascade: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    spec_id: str | None = None


@attrs.frozen(kw_only=True)
class Proposal:
    """A candidate: layer spec dicts (any registered kinds) with the designer's reasons.
    ``usage`` maps model name → {"prompt_tokens", "completion_tokens", "retries"}."""

    layers: list[dict[str, Any]]
    diagnosis: str = ""
    rationale: str = ""
    meta: dict[str, Any] = attrs.field(factory=dict)
    usage: dict[str, dict[str, int]] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class DesignContext:
    """The designer's view of one task at one round."""

    task: TaskRef
    bridge: str
    spec: dict[str, Any]
    tools: list[ToolSpec]
    state_schema: dict[str, Any]
    baseline: dict[str, Any]
    episodes: list[Trajectory]
    target: Target
    band: tuple[float, float]
    direction: Literal["scaffold", "pressure"] | None
    diagnosis: dict[str, Any]
    attempts: list[Attempt]
    feedback: str | None
    registry: Registry
    round: int = 1
    # episodes played under the last measured candidate: what refinement should look at
    candidate_episodes: list[Trajectory] = attrs.field(factory=list)


class Designer(Protocol):
    name: str

    def propose(self, ctx: DesignContext) -> Proposal | None:
        """A new candidate for ``ctx``, or ``None`` when nothing is left to try."""

    def close(self) -> None:
        """Release clients."""


def metric_must_rise(decision: str) -> bool:
    """A measured ``below`` the band means the metric must go up."""
    return decision == "below"
