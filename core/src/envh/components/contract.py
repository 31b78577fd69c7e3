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
from ..stateview import LazyState
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
        # a hook that never reads its state parameter is handed None: no state is fetched
        self._needs_state = any(f is not None and _reads_param(f, 2 if h == "modify_transition" else 1)
                                for h, f in self.fns.items())

    def step(self, action: Action) -> EnvResponse:
        """The generic harness step with the three sandboxed hooks inlined: this layer sits
        on hot paths and its cost is measured (bench/step_overhead.py)."""
        if type(action) is not Action:
            return super().step(action)
        call, memo, fns = self.sandbox.call3, self.memo, self.fns
        state = LazyState(self.inner) if self._needs_state else None
        a_eff, sent, t_eff, o_eff = "passed", action, False, False
        fa = fns["filter_action"]
        if fa is not None:
            out = call(fa, "filter_action", action, state, memo)
            if out is not None and out is not action:
                if type(out) is Block:
                    a_eff = "blocked"
                elif type(out) is Action:
                    if out != action:
                        a_eff, sent = "rewritten", out
                else:
                    raise errors.ContractCodeError(
                        f"must return Action, Block or None; got {type(out).__name__}", hook="filter_action")
        if a_eff == "blocked":
            sent, received = out, None
            resp = self._blocked(out)
        else:
            resp = self.inner.step(sent)
            received = resp.observation
            if state is not None:
                state._data = None
            if fns["modify_transition"] is not None:
                new = self.modify_transition(sent, resp, state)  # type: ignore[arg-type]
                if new is not resp:
                    t_eff, resp = new != resp, new
        obs = resp.observation
        fo = fns["filter_observation"]
        if fo is not None:
            new_obs = call(fo, "filter_observation", obs, state, memo)
            if new_obs is not None and new_obs is not obs:
                if type(new_obs) is str:
                    o_eff = new_obs != obs.text
                    new_obs = Observation(text=new_obs, data=obs.data)
                elif isinstance(new_obs, Observation):
                    o_eff = new_obs != obs
                else:
                    raise errors.ContractCodeError(
                        f"must return Observation, str or None; got {type(new_obs).__name__}",
                        hook="filter_observation")
                obs = new_obs
        return self._finish(resp, obs, sent, received, a_eff, t_eff, o_eff)

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


def _reads_param(fn: Any, position: int) -> bool:
    """Does ``fn`` (or a closure inside it) ever read its positional parameter?"""
    import dis

    code = fn.__code__
    if position >= code.co_argcount:
        return False
    name = code.co_varnames[position]
    if name in code.co_cellvars:
        return True
    return any(i.argval == name and i.opname.startswith("LOAD") for i in dis.get_instructions(code))


def build(spec: ContractSpec, inner: ActionableEnv, ctx: BuildContext) -> EnvHarness:
    layer_id = spec.id or f"{ctx.index}:contract"
    if spec.code is not None:
        return CodeContract(inner, spec.code, time_limit=spec.time_limit_ms / 1000, layer_id=layer_id)
    cls = resolve(spec.cls)  # type: ignore[arg-type]
    if not (isinstance(cls, type) and issubclass(cls, EnvHarness)):
        raise errors.SpecError(f"contract cls {spec.cls!r} is not an envh.EnvHarness subclass")
    return cls(inner, layer_id=layer_id, **spec.config)  # type: ignore[call-arg]
