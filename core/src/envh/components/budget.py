"""Budget: a step limit (truncation) and an optional repetition guard."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..env import ActionableEnv
from ..harness import _VERDICT_COMPOSER, EnvHarness
from ..spec import BuildContext, LayerSpec
from ..types import Action, EnvResponse, ResetResult


@attrs.frozen(kw_only=True)
class BudgetSpec(LayerSpec):
    """Truncate after ``max_steps`` steps, or after ``max_repeats`` identical observations
    in a row. Steps replayed by a Stage are not charged."""

    kind: Literal["budget"] = "budget"
    max_steps: int | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.ge(1)))
    max_repeats: int | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.ge(2)))


class Budget(EnvHarness, _core_step=_VERDICT_COMPOSER):
    """Counts the policy's steps (not a stage's replay) and truncates at the limits."""

    kind = "budget"

    def __init__(self, inner: ActionableEnv, *, max_steps: int | None = None,
                 max_repeats: int | None = None, layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        self.max_steps, self.max_repeats = max_steps, max_repeats
        self.steps = 0
        self.repeats = 0
        self.last_text: str | None = None
        self.replaying = False

    def on_reset(self, result: ResetResult) -> ResetResult:
        self.steps, self.repeats, self.last_text = 0, 0, result.observation.text
        return result

    def on_replay_start(self) -> None:
        self.replaying = True

    def on_replay_complete(self) -> None:
        self.steps, self.repeats, self.replaying = 0, 0, False

    def step(self, action: Action) -> EnvResponse:
        # a dedicated step: a budget only counts and truncates, so it skips the generic
        # hook machinery (it sits on every stack and must cost next to nothing)
        resp = self.inner.step(action)
        info = resp.info
        truncated = False
        if not self.replaying:
            steps = self.steps = self.steps + 1
            text = resp.observation.text
            repeats = self.repeats = self.repeats + 1 if text == self.last_text else 0
            self.last_text = text
            reason = None
            if self.max_steps is not None and steps >= self.max_steps:
                reason = f"step budget of {self.max_steps} used"
            elif self.max_repeats is not None and repeats + 1 >= self.max_repeats:
                reason = f"the same observation {self.max_repeats} times in a row"
            if reason is not None and not (resp.terminated or resp.truncated):
                info["truncated_by"] = reason
                resp = EnvResponse(observation=resp.observation, reward=resp.reward,
                                   terminated=False, truncated=True, info=info)
                truncated = True
        info.setdefault("envh", []).append({"layer": self.layer_id, "kind": self.kind, "action": "passed",
                                            "transition": truncated, "observation": False})
        self._see(info, resp.observation)
        return resp

    def layer_state(self) -> Any:
        return {"steps": self.steps, "repeats": self.repeats, "last_text": self.last_text,
                "replaying": self.replaying}

    def load_layer_state(self, data: Any) -> None:
        self.steps, self.repeats, self.last_text = data["steps"], data["repeats"], data["last_text"]
        self.replaying = bool(data.get("replaying", False))


def build(spec: BudgetSpec, inner: ActionableEnv, ctx: BuildContext) -> Budget:
    return Budget(inner, max_steps=spec.max_steps, max_repeats=spec.max_repeats,
                  layer_id=spec.id or f"{ctx.index}:budget")
