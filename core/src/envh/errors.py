"""One error hierarchy for envh.

Messages say what was wrong, where, and how to fix it. Errors that describe bad input
from a policy or a designer carry structured fields so callers can show them to a model.
"""

from __future__ import annotations

from typing import Any


class EnvhError(Exception):
    """Base class of every error envh raises on purpose."""


class PluginError(EnvhError):
    """A plugin failed to load or contributed something invalid."""


class PluginConflictError(PluginError):
    """Two plugins contributed the same name in the same namespace."""


class UnknownNameError(EnvhError, LookupError):
    """A name (bridge, component kind, policy, ...) that no loaded plugin provides."""

    def __init__(self, what: str, name: str, choices: list[str]) -> None:
        self.what, self.name, self.choices = what, name, sorted(choices)
        listed = ", ".join(self.choices) or "(none installed)"
        super().__init__(f"Unknown {what} {name!r}. Choose one of: {listed}")


class SpecError(EnvhError, ValueError):
    """An env spec is malformed; the message carries the path of each problem."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        super().__init__(message if not self.problems else message + "\n  " + "\n  ".join(self.problems))


class SealedVerifierError(EnvhError, TypeError):
    """A component tried to define or alter the verifier, which is sealed."""


class StateError(EnvhError, ValueError):
    """Env state is not plain JSON data, or a saved state cannot be restored."""


class ReplayError(EnvhError):
    """A Stage replay action errored or ended the episode.

    ``index`` is the position of the failing action in the stage's list, ``observation``
    the text the env answered with, so a designer can repair the stage.
    """

    def __init__(self, index: int, action: Any, observation: str, reason: str) -> None:
        self.index, self.action, self.observation, self.reason = index, action, observation, reason
        super().__init__(
            f"Stage replay failed at action #{index} ({action!r}): {reason}. "
            f"The env answered: {observation[:500]!r}"
        )


class ContractCodeError(EnvhError):
    """Untrusted contract code broke a rule or raised; ``lineno``/``col`` locate it."""

    def __init__(self, message: str, *, lineno: int | None = None, col: int | None = None,
                 hook: str | None = None) -> None:
        self.message, self.lineno, self.col, self.hook = message, lineno, col, hook
        where = "" if lineno is None else f"line {lineno}: " if col is None else f"line {lineno}, column {col}: "
        in_hook = f"in {hook}(): " if hook else ""
        super().__init__(f"Contract code error: {in_hook}{where}{message}")


class EpisodeError(EnvhError):
    """Base of the error classes an episode can end with (recorded on the trajectory)."""

    error_class = "env_error"


class EnvError(EpisodeError):
    """The environment itself failed (a bug or broken state in the bridge)."""

    error_class = "env_error"


class InfraError(EpisodeError):
    """Infrastructure failed: a container died, an image is missing, a worker crashed."""

    error_class = "infra_error"


class PolicyError(EpisodeError):
    """The policy could not produce an action (endpoint down after retries, ...)."""

    error_class = "policy_error"


class EpisodeTimeout(EpisodeError):
    """An episode ran past its wall-clock limit."""

    error_class = "timeout"


class EndpointError(PolicyError):
    """A model endpoint failed, not the model: a transport error (connection refused,
    timeout), an HTTP 5xx answer or a rate limit, after the policy's own retries.

    ``kind`` is ``transport``, ``server``, ``rate_limit`` or ``deadline`` (the episode's
    time limit ran out while the policy waited on the endpoint); ``status`` the HTTP status
    when there was one. Runners may re-run such an episode later (the endpoint may be
    back), which they never do for other policy errors.
    """

    KINDS = ("transport", "server", "rate_limit", "deadline")

    def __init__(self, message: str, *, kind: str, status: int | None = None, endpoint: str | None = None) -> None:
        self.kind, self.status, self.endpoint = kind, status, endpoint
        super().__init__(message)


class JailError(EnvhError):
    """The jail for untrusted code cannot run here (bubblewrap missing as root, no process)."""


class CurriculumEvaluationError(SpecError):
    """An evaluation would play through a layer that adapts the task distribution (a
    curriculum, or any kind declared ``training_only``): evaluation sets stay fixed, so only
    a run declared as training may."""
