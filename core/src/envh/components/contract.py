"""Contract: the rules axis. f_A rewrites or blocks actions, f_T overrides transitions,
f_O masks or augments observations.

Authored either as a Python class (a plugin's ``EnvHarness`` subclass, named by import
path in ``cls``) or as untrusted source code (``code``) defining any of::

    def filter_action(action, state, memo): ...            # -> Action | Block | None
    def modify_transition(action, response, state, memo): ...  # -> EnvResponse | None
    def filter_observation(observation, state, memo): ...  # -> Observation | str | None

``None`` means "unchanged". ``memo`` is a dict that lives for one episode. The code runs
in ``envh.sandbox``: violations and runtime errors raise ``ContractCodeError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .. import errors
from ..env import ActionableEnv
from ..harness import EnvHarness
from ..plugins.records import resolve
from ..sandbox import Sandbox
from ..spec import BuildContext, LayerSpec
from ..types import Action, Block, EnvResponse, Observation, ResetResult

HOOKS = ("filter_action", "modify_transition", "filter_observation")


@attrs.frozen(kw_only=True)
class ContractSpec(LayerSpec):
    """Exactly one of ``code`` (untrusted source) or ``cls`` (``"module:Class"``)."""

    kind: Literal["contract"] = "contract"
    code: str | None = None
    cls: str | None = None
    config: dict[str, Any] = attrs.field(factory=dict)
    time_limit_ms: float = attrs.field(default=250.0, validator=attrs.validators.gt(0))

    def __attrs_post_init__(self) -> None:
        if (self.code is None) == (self.cls is None):
            raise ValueError("a contract needs exactly one of 'code' or 'cls'")


class CodeContract(EnvHarness):
    """A contract whose hooks are untrusted code run in the sandbox."""

    kind = "contract"

    def __init__(self, inner: ActionableEnv, code: str, *, time_limit: float = 0.25,
                 layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        self.code = code
        names = {"Action": Action, "Block": Block, "Observation": Observation,
                 "EnvResponse": EnvResponse, "evolve": attrs.evolve}
        self.sandbox = Sandbox(code, names=names, time_limit=time_limit, allowed_functions=HOOKS)
        self.fns: dict[str, Any] = {h: self.sandbox.function(h) for h in HOOKS}
        if not any(self.fns.values()):
            raise errors.ContractCodeError(
                "the code defines none of filter_action, modify_transition, filter_observation")
        self._overrides = frozenset({"on_reset", *(h for h, f in self.fns.items() if f)})  # type: ignore[misc]
        self.memo: dict[str, Any] = {}

    def on_reset(self, result: ResetResult) -> ResetResult:
        self.memo = {}
        return result

    def filter_action(self, action: Action, state: Mapping[str, Any]) -> Action | Block:
        out = self.sandbox.call_function(self.fns["filter_action"], "filter_action",
                                         action, state, self.memo)
        if out is None or type(out) is Action or type(out) is Block:
            return action if out is None else out
        raise errors.ContractCodeError(
            f"must return Action, Block or None; got {type(out).__name__}", hook="filter_action")

    def modify_transition(self, action: Action, response: EnvResponse,
                          state: Mapping[str, Any]) -> EnvResponse:
        info = response.info
        effects = info.get("envh")
        before = (len(info), len(effects) if effects is not None else -1)
        out = self.sandbox.call_function(self.fns["modify_transition"], "modify_transition",
                                         action, response, state, self.memo)
        # info is the caller's dict (no copy per step); in-place edits would go unrecorded
        if before != (len(info), len(effects) if effects is not None else -1) or info.get("envh") is not effects:
            raise errors.ContractCodeError(
                "changed response.info in place; return evolve(response, info={...}) instead",
                hook="modify_transition")
        if out is None or out is response:
            return response
        if type(out) is not EnvResponse:
            raise errors.ContractCodeError(
                f"must return EnvResponse or None; got {type(out).__name__}", hook="modify_transition")
        if out.reward != response.reward:
            raise errors.ContractCodeError(
                "changed the reward; rewards come from the benchmark's verifier and are sealed. "
                "Change the observation or flags instead.", hook="modify_transition")
        new_info = dict(out.info)
        if "envh" in info:
            new_info["envh"] = info["envh"]
        return EnvResponse(observation=out.observation, reward=out.reward, terminated=out.terminated,
                           truncated=out.truncated, info=new_info)

    def filter_observation(self, observation: Observation, state: Mapping[str, Any]) -> Observation:
        out = self.sandbox.call_function(self.fns["filter_observation"], "filter_observation",
                                         observation, state, self.memo)
        if out is None:
            return observation
        if type(out) is str:
            return Observation(text=out, data=observation.data)
        if isinstance(out, Observation):
            return out
        raise errors.ContractCodeError(
            f"must return Observation, str or None; got {type(out).__name__}", hook="filter_observation")

    def layer_state(self) -> Any:
        try:
            return json.loads(json.dumps(self.memo))
        except (TypeError, ValueError) as exc:
            raise errors.StateError(
                f"contract {self.layer_id!r}: memo is not JSON data and cannot be saved: {exc}") from exc

    def load_layer_state(self, data: Any) -> None:
        self.memo = dict(data or {})


def build(spec: ContractSpec, inner: ActionableEnv, ctx: BuildContext) -> EnvHarness:
    layer_id = spec.id or f"{ctx.index}:contract"
    if spec.code is not None:
        return CodeContract(inner, spec.code, time_limit=spec.time_limit_ms / 1000, layer_id=layer_id)
    cls = resolve(spec.cls)  # type: ignore[arg-type]
    if not (isinstance(cls, type) and issubclass(cls, EnvHarness)):
        raise errors.SpecError(f"contract cls {spec.cls!r} is not an envh.EnvHarness subclass")
    return cls(inner, layer_id=layer_id, **spec.config)  # type: ignore[call-arg]
