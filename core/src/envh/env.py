"""ActionableEnv: the one interface every bridge and every stack of components exposes."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from .types import Action, EnvResponse, EvaluationResult, Observation, ResetResult, TaskRef, ToolSpec


class ActionableEnv(abc.ABC):
    """A tool-calling environment.

    The contract every implementation keeps:

    * ``reset(task=..., seed=...)`` is deterministic: the same (task, seed) gives the same
      first observation and, for the same actions, the same trajectory and verdict.
      ``task=None`` means the bridge's default task; the seed never chooses the task.
    * ``step(action)`` never raises for a policy mistake (unknown tool, wrong argument
      types, an inadmissible command, a huge string): it answers with an observation that
      says what was wrong and sets ``info["error"] = {"type": ..., "message": ...}``.
      Exceptions are for broken environments (``EnvError``) or infrastructure
      (``InfraError``), never for the policy's choices.
    * ``evaluate()`` is the benchmark's own verifier. Components cannot change it.
    * ``get_env_state()`` returns plain JSON data (a fresh object each call), described by
      ``env_state_schema()``; it is what components and designers read.
    * ``save_state()`` returns JSON data that ``from_state()`` restores into an env built
      from the same spec.
    """

    @abc.abstractmethod
    def tools(self) -> list[ToolSpec]:
        """The tools the policy may call now, with JSON Schema parameters."""

    @abc.abstractmethod
    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> ResetResult:
        """Start an episode of ``task``; deterministic for a given (task, seed)."""

    @abc.abstractmethod
    def step(self, action: Action) -> EnvResponse:
        """Apply one action. Policy mistakes become error observations, not exceptions."""

    @abc.abstractmethod
    def observe(self) -> Observation:
        """The current observation, without acting."""

    @abc.abstractmethod
    def evaluate(self) -> EvaluationResult:
        """The verifier's verdict on the episode so far."""

    @abc.abstractmethod
    def get_env_state(self) -> dict[str, Any]:
        """Plain JSON data describing the current state (see ``env_state_schema``)."""

    @abc.abstractmethod
    def env_state_schema(self) -> dict[str, Any]:
        """JSON Schema, with descriptions, of ``get_env_state()``; designers read it."""

    @abc.abstractmethod
    def save_state(self) -> dict[str, Any]:
        """JSON data from which ``from_state`` rebuilds the current episode state."""

    @abc.abstractmethod
    def from_state(self, state: Mapping[str, Any]) -> Observation:
        """Restore a state produced by ``save_state`` of an env built from the same spec;
        returns the observation at that point."""

    @abc.abstractmethod
    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        """The tasks this env can reset to, optionally for one split."""

    def notify_replay_start(self) -> None:
        """A Stage replay begins: steps until ``notify_replay_complete`` set up the start
        state and are not the policy's; budgets and guards must not charge them."""

    def notify_replay_complete(self) -> None:
        """A Stage replay ended: step budgets and repetition guards restart from here."""

    def close(self) -> None:
        """Release every resource (engines, containers, browsers). Idempotent."""

    @property
    def unwrapped(self) -> ActionableEnv:
        """The base environment under every layer."""
        return self

    def __enter__(self) -> ActionableEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
