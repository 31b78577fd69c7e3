"""Budgets of a rig run: rollouts, LLM tokens, dollars (from a price table) and wall-clock.

Rounds are limited per task by the loop itself. Usage is carried in the journal so a
resumed run keeps counting from where it stopped; wall-clock counts this process only.
The first exhausted limit becomes the recorded stop reason.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

#: USD per million (prompt, completion) tokens; override with ``--prices``.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6), "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6), "o4-mini": (1.1, 4.4),
}


@attrs.frozen(kw_only=True)
class Budget:
    """Limits; ``None`` means unlimited."""

    max_rollouts: int | None = None
    max_tokens: int | None = None
    max_dollars: float | None = None
    max_seconds: float | None = None
    prices: dict[str, Any] | None = None

    def price(self, model: str) -> tuple[float, float]:
        table = {**DEFAULT_PRICES, **{k: tuple(v) for k, v in (self.prices or {}).items()}}
        return table.get(model, table.get(model.split("/")[-1], (0.0, 0.0)))  # type: ignore[return-value]


@attrs.define
class Usage:
    """What a run has spent so far."""

    rollouts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dollars: float = 0.0
    llm_calls: int = 0
    retries: int = 0
    started: float = attrs.field(factory=time.monotonic)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add_llm(self, budget: Budget, usage: dict[str, dict[str, int]]) -> None:
        """Count a designer's token usage, by model, and its cost."""
        for model, u in usage.items():
            p, c = int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
            self.prompt_tokens += p
            self.completion_tokens += c
            self.llm_calls += int(u.get("calls", 0))
            self.retries += int(u.get("retries", 0))
            pin, pout = budget.price(model)
            self.dollars += (p * pin + c * pout) / 1e6

    def exhausted(self, budget: Budget, *, upcoming_rollouts: int = 0) -> str | None:
        """The first limit reached (``"budget:rollouts"``, ...) or ``None``."""
        if budget.max_rollouts is not None and self.rollouts + upcoming_rollouts > budget.max_rollouts:
            return "budget:rollouts"
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return "budget:tokens"
        if budget.max_dollars is not None and self.dollars >= budget.max_dollars:
            return "budget:dollars"
        if budget.max_seconds is not None and time.monotonic() - self.started >= budget.max_seconds:
            return "budget:wall_clock"
        return None

    def to_data(self) -> dict[str, Any]:
        return {"rollouts": self.rollouts, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "dollars": round(self.dollars, 6),
                "llm_calls": self.llm_calls, "retries": self.retries}

    def load(self, data: dict[str, Any]) -> None:
        for k in ("rollouts", "prompt_tokens", "completion_tokens", "llm_calls", "retries"):
            setattr(self, k, int(data.get(k, 0)))
        self.dollars = float(data.get("dollars", 0.0))


class BudgetExhausted(Exception):
    """Raised inside the loop when a limit is reached; carries the stop reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)
