"""Stage: a new start state by replaying actions after reset (changes s0)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .. import errors
from ..env import ActionableEnv
from ..harness import EnvHarness
from ..spec import BuildContext, LayerSpec
from ..types import Action, ResetResult


@attrs.frozen(kw_only=True)
class StageSpec(LayerSpec):
    """Replay ``actions`` through the inner env after every reset. ``observation``: what
    the policy sees first — the answer to the last replayed action (``last``), or the
    reset observation (``reset``: e.g. keep ALFWorld's room description)."""

    kind: Literal["stage"] = "stage"
    actions: tuple[Action, ...] = ()
    observation: Literal["last", "reset"] = "last"


class Stage(EnvHarness):
    """Replays its actions after reset, then tells the stack the replay is over so
    step budgets and repetition guards do not charge it."""

    kind = "stage"

    def __init__(self, inner: ActionableEnv, actions: tuple[Action, ...] | list[Action], *,
                 observation: str = "last", layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        self.actions = tuple(actions)
        self.show = observation

    def on_reset(self, result: ResetResult) -> ResetResult:
        obs = result.observation
        self.inner.notify_replay_start()
        for i, action in enumerate(self.actions):
            resp = self.inner.step(action)
            err = resp.info.get("error")
            if err:
                raise errors.ReplayError(i, action, resp.observation.text,
                                         f"the action failed ({err.get('type')}: {err.get('message')})")
            if resp.terminated or resp.truncated:
                raise errors.ReplayError(i, action, resp.observation.text,
                                         "the episode ended during the replay")
            obs = resp.observation
        self.inner.notify_replay_complete()
        if self.show == "reset":
            obs = result.observation
        info: dict[str, Any] = dict(result.info)
        info["stage"] = [*result.info.get("stage", ()), {"layer": self.layer_id, "replayed": len(self.actions)}]
        return ResetResult(observation=obs, info=info)


def build(spec: StageSpec, inner: ActionableEnv, ctx: BuildContext) -> Stage:
    return Stage(inner, spec.actions, observation=spec.observation, layer_id=spec.id or f"{ctx.index}:stage")
