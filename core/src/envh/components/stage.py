"""Stage: a new start state by replaying actions after reset (changes s0)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .. import errors
from ..env import ActionableEnv
from ..harness import EnvHarness, _obs_data
from ..spec import BuildContext, LayerSpec
from ..types import Action, Observation, ResetResult


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
    step budgets and repetition guards do not charge it, and tells the base env what it
    shows the policy (``Bridge.replay_shown``), so the bridge's ``observe()`` returns that,
    whatever the ``observation`` mode, until the next action (also after ``from_state``:
    the layer's saved state keeps it)."""

    kind = "stage"

    def __init__(self, inner: ActionableEnv, actions: tuple[Action, ...] | list[Action], *,
                 observation: str = "last", layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        self.actions = tuple(actions)
        self.show = observation
        self._shown: Observation | None = None

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
        obs = self._shown = self._tell_base(obs)
        info: dict[str, Any] = dict(result.info)
        info["stage"] = [*result.info.get("stage", ()), {"layer": self.layer_id, "replayed": len(self.actions)}]
        return ResetResult(observation=obs, info=info)

    def _tell_base(self, obs: Observation) -> Observation:
        """What the base env makes of what this stage shows (a bridge may bring a reset
        view up to date with the world after the replay); unchanged for a base env without
        ``replay_shown`` (a chain, an env that is not a Bridge)."""
        tell = getattr(getattr(self.inner, "unwrapped", None), "replay_shown", None)
        if not callable(tell):
            return obs
        told = tell(obs)
        return told if isinstance(told, Observation) else obs

    def layer_state(self) -> Any:
        return None if self._shown is None else {"shown": _obs_data(self._shown)}

    def load_layer_state(self, data: Any) -> None:
        shown = data.get("shown") if isinstance(data, dict) else None
        if isinstance(shown, dict) and isinstance(shown.get("text"), str):
            self._shown = self._tell_base(Observation(text=shown["text"], data=dict(shown.get("data") or {})))


def build(spec: StageSpec, inner: ActionableEnv, ctx: BuildContext) -> Stage:
    return Stage(inner, spec.actions, observation=spec.observation, layer_id=spec.id or f"{ctx.index}:stage")
