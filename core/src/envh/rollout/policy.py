"""The policy protocol every policy kind implements."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import attrs

from ..types import Action, Observation, TaskRef, ToolSpec
from .trajectory import ModelTurn

ENDPOINT_MARK = "envh_waiting_on"  # on an exception raised inside ``waiting_on``: (endpoint, seconds waited)


@contextlib.contextmanager
def waiting_on(endpoint: str) -> Iterator[None]:
    """Wrap one request of a policy to a model endpoint, its retries and their back-off
    included. When the episode's time limit runs out inside it and this request had then
    gone unanswered for at least half the limit (a hung, paused or overloaded server), the
    runner records an endpoint failure (``EndpointError``, retryable, counted by
    ``--max-endpoint-failures``) instead of a timeout of the episode. A limit that runs out
    while a healthy server is answering a request of a long episode stays a ``timeout``."""
    started = time.monotonic()
    try:
        yield
    except BaseException as exc:
        if getattr(exc, ENDPOINT_MARK, None) is None:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(exc, ENDPOINT_MARK, (endpoint, time.monotonic() - started))
        raise


@attrs.frozen(kw_only=True)
class PolicyStep:
    """One decision: the action (``None`` when the output could not be parsed), the raw
    model output, why it was invalid, token usage and latency. Chat policies add
    ``turn``: exactly what the model saw and produced (stored on the step record)."""

    action: Action | None
    raw: Any = None
    invalid: str | None = None
    usage: dict[str, int] = attrs.field(factory=dict)
    latency_s: float = 0.0
    turn: ModelTurn | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.instance_of(ModelTurn)))


@runtime_checkable
class Policy(Protocol):
    """Chooses actions. ``policy_id`` names it in trajectories (kind, model, options)."""

    policy_id: str

    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        """A new episode begins (clear conversation history). ``seed`` is the episode's
        seed: policies that sample derive their randomness from it, so an episode is
        reproducible whichever worker runs it and in whatever order."""

    def act(self, observation: Observation, tools: list[ToolSpec]) -> PolicyStep:
        """The next action for ``observation``."""

    def close(self) -> None:
        """Release resources (HTTP clients, models)."""
