"""Chain: join N ≥ 2 environments; the episode succeeds only if every leg's own
verifier passes. The only component that composes verdicts, and only base verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .. import errors
from ..env import ActionableEnv
from ..harness import _VERDICT_COMPOSER, EnvHarness
from ..spec import BuildContext, EnvSpec, LayerSpec
from ..types import Action, EnvResponse, EvaluationResult, Observation, ResetResult, TaskRef, ToolSpec, thaw


@attrs.frozen(kw_only=True)
class ChainSpec(LayerSpec):
    """The env below this layer is leg 0; ``legs`` are the further legs (nested specs).

    ``mode``: ``sequential`` (the next leg starts, lazily, when the current one
    terminates) or ``alternate`` (switch leg every step). ``carry`` prefixes the new leg's
    observation with the previous leg's last one. ``leg_tasks`` pins tasks of the further
    legs (``None``: the leg's default task).
    """

    kind: Literal["chain"] = "chain"
    legs: tuple[EnvSpec, ...] = attrs.field(validator=attrs.validators.min_len(1))
    mode: Literal["sequential", "alternate"] = "sequential"
    carry: bool = False
    leg_tasks: tuple[TaskRef | None, ...] = ()


class Chain(EnvHarness, _composes_verdicts=_VERDICT_COMPOSER, _core_step=_VERDICT_COMPOSER):
    kind = "chain"

    def __init__(self, inner: ActionableEnv, legs: list[ActionableEnv], *, mode: str = "sequential",
                 carry: bool = False, leg_tasks: tuple[TaskRef | None, ...] = (),
                 layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        self.legs: list[ActionableEnv] = [inner, *legs]
        self.mode, self.carry = mode, carry
        self.leg_tasks = (None, *leg_tasks, *([None] * len(legs)))[: len(self.legs)]
        self._reset_state()

    def _reset_state(self) -> None:
        n = len(self.legs)
        self.current = 0
        self.started, self.done = [False] * n, [False] * n
        self.obs: list[Observation | None] = [None] * n
        self._seed: int | None = None
        self._options: Mapping[str, Any] | None = None

    def _start(self, i: int, task: TaskRef | None = None) -> Observation:
        result = self.legs[i].reset(task=task or self.leg_tasks[i], seed=self._seed, options=self._options)
        self.started[i] = True
        self.obs[i] = result.observation
        return result.observation

    def _with_carry(self, prev: Observation | None, obs: Observation) -> Observation:
        if not self.carry or prev is None:
            return obs
        return Observation(text=f"[previous task]\n{prev.text}\n\n[next task]\n{obs.text}", data=obs.data)

    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> ResetResult:
        self._reset_state()
        self._seed, self._options = seed, options
        first = self._start(0, task)
        if self.mode == "alternate":
            for i in range(1, len(self.legs)):
                self._start(i)
        self._last_obs = first
        return ResetResult(observation=first, info={
            "envh": [self._effect(leg=0)], "chain": {"leg": 0, "legs": len(self.legs)}})

    def step(self, action: Action) -> EnvResponse:
        i = self.current
        resp = self.legs[i].step(action)
        self.obs[i] = resp.observation
        effect = self._effect(leg=i)
        terminated, truncated, obs = False, False, resp.observation
        if resp.truncated and self.mode == "sequential":
            truncated = True
        elif resp.terminated or resp.truncated:
            self.done[i] = True
        if self.mode == "sequential" and self.done[i]:
            if i + 1 < len(self.legs):
                self.current = i + 1
                obs = self._with_carry(resp.observation, self._start(i + 1))
                effect["switched_to"] = i + 1
            else:
                terminated = True
        elif self.mode == "alternate":
            nxt = [j % len(self.legs) for j in range(i + 1, i + 1 + len(self.legs))
                   if not self.done[j % len(self.legs)]]
            if not nxt:
                terminated = True
            else:
                self.current = nxt[0]
                if self.current != i:
                    obs = self._with_carry(resp.observation, self.obs[self.current] or resp.observation)
                    effect["switched_to"] = self.current
        info = dict(resp.info)
        info["envh"] = [*resp.info.get("envh", ()), effect]
        info["chain"] = {"leg": self.current, "legs": len(self.legs)}
        self._last_obs = obs
        return EnvResponse(observation=obs, reward=resp.reward, terminated=terminated,
                           truncated=truncated, info=info)

    def evaluate(self) -> EvaluationResult:
        verdicts = [leg.evaluate() if started else EvaluationResult(success=False, score=0.0,
                                                                     metrics={"started": False})
                    for leg, started in zip(self.legs, self.started)]
        return EvaluationResult(
            success=all(v.success for v in verdicts),
            score=sum(v.score for v in verdicts) / len(verdicts),
            metrics={"legs": [{"success": v.success, "score": v.score, "metrics": v.metrics}
                              for v in verdicts]})

    def tools(self) -> list[ToolSpec]:
        return self.legs[self.current].tools()

    def observe(self) -> Observation:
        return self._last_obs if self._last_obs is not None else self.legs[self.current].observe()

    def get_env_state(self) -> dict[str, Any]:
        return {"mode": self.mode, "current_leg": self.current, "done": list(self.done),
                "legs": [leg.get_env_state() if s else None for leg, s in zip(self.legs, self.started)]}

    def env_state_schema(self) -> dict[str, Any]:
        return {"type": "object", "description": "A chain of environments; the episode succeeds "
                "only if every leg's verifier passes.", "properties": {
                    "mode": {"type": "string", "enum": ["sequential", "alternate"]},
                    "current_leg": {"type": "integer", "description": "index of the leg being played"},
                    "done": {"type": "array", "items": {"type": "boolean"},
                             "description": "legs whose episode ended"},
                    "legs": {"type": "array", "description": "each leg's state (null before it starts)",
                             "items": [leg.env_state_schema() for leg in self.legs]}}}

    def notify_replay_start(self) -> None:
        self.legs[self.current].notify_replay_start()

    def notify_replay_complete(self) -> None:
        self.legs[self.current].notify_replay_complete()

    def close(self) -> None:
        problems = []
        for leg in self.legs:
            try:
                leg.close()
            except Exception as exc:  # noqa: BLE001 - close every leg, report after
                problems.append(exc)
        if problems:
            raise errors.EnvError(f"closing {len(problems)} chain leg(s) failed: {problems!r}") from problems[0]

    def save_state(self) -> dict[str, Any]:
        return {"format": "layer", "layer": self.layer_id, "kind": self.kind,
                "inner": self.legs[0].save_state(),
                "data": {"current": self.current, "started": self.started, "done": self.done,
                         "legs": [leg.save_state() if s else None
                                  for leg, s in zip(self.legs[1:], self.started[1:])],
                         # what the policy last saw of each leg, and of the chain: after an
                         # error step these differ from the legs' observe()
                         "obs": [_obs_data(o) for o in self.obs],
                         "last_observation": _obs_data(self._last_obs)}}

    def from_state(self, state: Mapping[str, Any]) -> Observation:
        if state.get("kind") != "chain":
            raise errors.StateError(f"Saved layer of kind {state.get('kind')!r} is not a chain.")
        data = state["data"]
        self._reset_state()
        self.obs[0] = self.legs[0].from_state(state["inner"])
        for i, saved in enumerate(data["legs"], start=1):
            if saved is not None:
                self.obs[i] = self.legs[i].from_state(saved)
        self.current, self.started, self.done = data["current"], list(data["started"]), list(data["done"])
        for i, saved_obs in enumerate(data.get("obs") or []):
            if saved_obs is not None:
                self.obs[i] = _obs_from(saved_obs)
        last = data.get("last_observation")
        self._last_obs = _obs_from(last) if last is not None else self.obs[self.current]
        return self._last_obs  # type: ignore[return-value]


def _obs_data(obs: Observation | None) -> dict[str, Any] | None:
    return None if obs is None else {"text": obs.text, "data": thaw(obs.data)}


def _obs_from(data: Mapping[str, Any]) -> Observation:
    return Observation(text=data["text"], data=dict(data.get("data") or {}))


def build(spec: ChainSpec, inner: ActionableEnv, ctx: BuildContext) -> Chain:
    legs: list[ActionableEnv] = []
    try:
        for leg in spec.legs:
            legs.append(ctx.make(leg))
    except BaseException:
        for leg_env in legs:
            leg_env.close()
        raise
    return Chain(inner, legs, mode=spec.mode, carry=spec.carry, leg_tasks=spec.leg_tasks,
                 layer_id=spec.id or f"{ctx.index}:chain")
