"""EnvHarness: the decorator base every component kind subclasses.

A harness wraps an inner ``ActionableEnv`` and reshapes it only at the interface:
``on_reset`` (Stage: a new start state), ``answer_action`` (answer an action itself, for a
reward of 0: a workspace's meta-actions), ``filter_action`` (f_A: rewrite or block),
``modify_transition`` (f_T: override a transition), ``filter_observation`` (f_O: mask or
augment). It forwards everything else, so a stack of any depth is still an
``ActionableEnv``. The verifier is sealed: a subclass defining ``evaluate`` is rejected
when the class is created, and ``modify_transition`` cannot change the reward.
"""

from __future__ import annotations

import abc
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from . import errors
from .env import ActionableEnv
from .stateview import LazyState, check_plain
from .types import (
    Action,
    Answer,
    Block,
    EnvResponse,
    EvaluationResult,
    FrozenList,
    Observation,
    ResetResult,
    TaskRef,
    ToolSpec,
    _response,
    thaw,
)

_VERDICT_COMPOSER = object()  # only reviewed kinds hold it (envh.components; first-party plugins' fused steps)
_COMPOSERS: set[type] = set()  # classes whose evaluate() combines base verdicts (chain)
_CORE_STEPS: set[type] = set()  # core kinds whose step() is a fused form of the generic one
_BUILT_ON: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_HOOKS = ("on_reset", "answer_action", "filter_action", "modify_transition", "filter_observation")
_STEP_HOOKS = frozenset(_HOOKS[1:])


#: The keys core writes in a layer's effect record (``info["envh"]``): an ``Answer`` may not set them.
EFFECT_KEYS = frozenset({"layer", "kind", "action", "transition", "observation", "observation_before",
                         "reason", "sent"})


def answered(info: Mapping[str, Any]) -> bool:
    """Whether a layer answered this step itself (``answer_action``): the innermost effect
    says so. Nothing in the world changed, so no layer's ``observe()`` moves."""
    effects = info.get("envh")
    if not effects or type(effects) is not list:
        return False
    first = effects[0]
    return type(first) is dict and first.get("action") == "answered"


class _Sealed:
    """A data descriptor around ``evaluate``: instances cannot shadow or replace it."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self.fn if obj is None else self.fn.__get__(obj, owner)

    def __set__(self, obj: Any, value: Any) -> None:
        raise errors.SealedVerifierError("evaluate cannot be replaced: the verifier is sealed.")

    def __delete__(self, obj: Any) -> None:
        raise errors.SealedVerifierError("evaluate cannot be removed: the verifier is sealed.")


class _SealedMeta(abc.ABCMeta):
    def __setattr__(cls, name: str, value: Any) -> None:
        if name in ("evaluate", "__getattribute__"):
            raise errors.SealedVerifierError(
                f"{cls.__name__}.evaluate cannot be replaced: the verifier is sealed.")
        super().__setattr__(name, value)


class EnvHarness(ActionableEnv, metaclass=_SealedMeta):
    """Base class of component kinds. Override any of the four hooks; never ``evaluate``."""

    kind: ClassVar[str] = "harness"
    _overrides: ClassVar[frozenset[str]] = frozenset()
    _passive: ClassVar[bool] = True  # no step hooks: the layer acts only at reset

    def __init_subclass__(cls, _composes_verdicts: object = None, _core_step: object = None,
                          **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _composes_verdicts is _VERDICT_COMPOSER and "evaluate" in cls.__dict__:
            _COMPOSERS.add(cls)
        if _core_step is _VERDICT_COMPOSER and "step" in cls.__dict__:
            _CORE_STEPS.add(cls)
        for klass in cls.__mro__:  # a mixin ahead of EnvHarness in the MRO counts too
            if klass is EnvHarness:
                break
            if "evaluate" in klass.__dict__ and klass not in _COMPOSERS:
                raise errors.SealedVerifierError(
                    f"{cls.__module__}.{cls.__qualname__} defines evaluate()"
                    + ("" if klass is cls else f" (through {klass.__qualname__} in its MRO)")
                    + ", but the verifier is sealed: components reshape start states, rules and "
                    "observations, never the verdict. Remove evaluate() from the component.")
        if "evaluate" in cls.__dict__:
            type.__setattr__(cls, "evaluate", _Sealed(cls.__dict__["evaluate"]))
        cls._overrides = frozenset(
            h for h in _HOOKS if getattr(cls, h) is not getattr(EnvHarness, h))
        cls._passive = not cls._overrides & _STEP_HOOKS

    def __init__(self, inner: ActionableEnv, *, layer_id: str | None = None) -> None:
        self.inner = inner
        self.layer_id = layer_id or self.kind
        self._last_obs: Observation | None = None

    # -- hooks (override in component kinds) -------------------------------------------
    def on_reset(self, result: ResetResult) -> ResetResult:
        """Called after the inner env reset; Stage replays actions here."""
        return result

    def answer_action(self, action: Action, state: Mapping[str, Any]) -> Answer | None:
        """Answer ``action`` in this layer (an ``Answer``: what the policy sees) instead of
        passing it on (``None``). Core then steps neither the inner env nor this layer's
        other step hooks; the step earns 0, ends nothing and leaves ``observe()`` as it was,
        in this layer and every one outside. Layers outside see it as any step (a budget
        outside charges it). Only actions (``type(action) is Action``) are offered."""
        return None

    def filter_action(self, action: Action, state: Mapping[str, Any]) -> Action | Block:
        """f_A: return the action (possibly rewritten) or a ``Block``."""
        return action

    def modify_transition(self, action: Action, response: EnvResponse,
                          state: Mapping[str, Any]) -> EnvResponse:
        """f_T: override the inner transition (observation, flags, info); not the reward."""
        return response

    def filter_observation(self, observation: Observation, state: Mapping[str, Any]) -> Observation:
        """f_O: mask or augment what the policy sees."""
        return observation

    def layer_state(self) -> Any:
        """JSON data of this layer's own episode memory (for save/restore)."""
        return None

    def load_layer_state(self, data: Any) -> None:
        """Restore what ``layer_state`` returned."""

    def on_replay_start(self) -> None:
        """A stage replay below or at this layer begins: stop charging budgets here."""

    def on_replay_complete(self) -> None:
        """A stage replay below or at this layer finished: rewind counters here."""

    # -- the interface -----------------------------------------------------------------
    def _state(self) -> LazyState:
        return LazyState(self.inner)

    def _effect(self, **what: Any) -> dict[str, Any]:
        return {"layer": self.layer_id, "kind": self.kind, **what}

    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> ResetResult:
        result = self.inner.reset(task=task, seed=seed, options=options)
        if "on_reset" in self._overrides:
            result = self.on_reset(result)
        obs = result.observation
        changed = False
        if "filter_observation" in self._overrides:
            new = self.filter_observation(obs, self._state())
            changed = new != obs
            obs = new
        info = dict(result.info)
        effect = self._effect(observation=changed)
        if changed:  # what this layer received, so a trajectory can show the base observation
            effect["observation_before"] = _obs_view(result.observation)
        info["envh"] = [*result.info.get("envh", ()), effect]
        self._last_obs = obs
        return ResetResult(observation=obs, info=info)

    def step(self, action: Action) -> EnvResponse:
        """Apply f_A, step the inner env, apply f_T and f_O, and record what this layer did.

        The response's ``info`` dict belongs to the caller: layers append their effect to
        ``info["envh"]`` in place rather than copying it at every level of the stack.
        """
        if self._passive:  # a layer that acts only at reset (stage): just record it
            resp = self.inner.step(action)
            info = resp.info
            info.setdefault("envh", []).append({"layer": self.layer_id, "kind": self.kind, "action": "passed",
                                                "transition": False, "observation": False})
            self._see(info, resp.observation)
            return resp
        over = self._overrides if type(action) is Action else self._overrides & {"filter_observation"}
        a_eff: str = "passed"
        t_eff = o_eff = False
        state = LazyState(self.inner)  # one view per step, emptied after the inner step
        if "answer_action" in over:
            answer = self.answer_action(action, state)
            if answer is not None:
                return self._answered(answer)
        sent: Action | Block = action
        received: Observation | None = None
        if "filter_action" in over:
            sent = self.filter_action(action, state)
            if sent is not action:
                if type(sent) is Block:
                    a_eff = "blocked"
                elif type(sent) is not Action:
                    raise errors.EnvhError(
                        f"{type(self).__name__}.filter_action returned {type(sent).__name__}; "
                        "expected Action or Block")
                elif sent != action:
                    a_eff = "rewritten"
        if a_eff == "blocked":
            resp = self._blocked(sent)  # type: ignore[arg-type]
        else:
            resp = self.inner.step(sent)  # type: ignore[arg-type]
            received = resp.observation
            state._data = None
            if "modify_transition" in over:
                view = hook_view(resp)
                new = self.modify_transition(sent, view, state)  # type: ignore[arg-type]
                if new is not view:
                    if new.reward != resp.reward:
                        raise errors.SealedVerifierError(
                            f"{type(self).__name__}.modify_transition changed the reward "
                            f"({resp.reward!r} → {new.reward!r}); rewards come from the base verifier.")
                    t_eff = new != view
                    if t_eff:
                        resp = adopt(new, resp)
        obs = resp.observation
        if "filter_observation" in over:
            new_obs = self.filter_observation(obs, state)
            if new_obs is not obs:
                o_eff = new_obs != obs
                obs = new_obs
        return self._finish(resp, obs, sent, received, a_eff, t_eff, o_eff)

    def _answered(self, answer: Answer) -> EnvResponse:
        """The step of an action this layer answered: reward 0, nothing ended, the inner env
        not stepped by core, ``observe()`` unchanged (here and in every layer outside)."""
        who = f"{type(self).__name__}.answer_action"
        if type(answer) is not Answer:
            raise errors.EnvhError(f"{who} returned {type(answer).__name__}; expected Answer or None")
        if type(answer.observation) is not Observation:
            raise errors.EnvhError(f"{who}'s Answer.observation is {type(answer.observation).__name__}; "
                                   "expected Observation")
        if "envh" in answer.info:
            raise errors.EnvhError(f"{who} set info['envh']: that key is core's record of each layer's effect")
        forged = sorted(EFFECT_KEYS & set(answer.effect))
        if forged:
            raise errors.EnvhError(f"{who}'s Answer.effect sets {', '.join(forged)}: core writes those keys of "
                                   "a layer's effect")
        error = answer.info.get("error")
        if error is not None and not (isinstance(error, Mapping) and type(error.get("type")) is str
                                      and type(error.get("message")) is str):
            raise errors.EnvhError(f"{who}'s info['error'] must be a mapping with a str 'type' and 'message', "
                                   "as a bridge's error is")
        info, extra = thaw(answer.info), thaw(answer.effect)
        try:
            check_plain(info, "$.info")
            check_plain(extra, "$.effect")
        except errors.StateError as exc:
            raise errors.EnvhError(f"{who}'s Answer holds something that is not JSON data: {exc}") from None
        effect = {**extra, "layer": self.layer_id, "kind": self.kind, "action": "answered",
                  "transition": True, "observation": True}
        # observe() keeps the state's view: an answer changes nothing in the world (a
        # restored stack, which never saw the answer, shows the same)
        return _response(answer.observation, 0.0, False, False, {**info, "envh": [effect]})

    def _see(self, info: Mapping[str, Any], obs: Observation) -> None:
        """``observe()`` follows a step's observation, unless the step was refused or a layer
        inside answered it: neither changes anything, so the state's view stays."""
        if "error" not in info and not answered(info):
            self._last_obs = obs

    @staticmethod
    def _blocked(block: Block) -> EnvResponse:
        """The answer to a blocked action: the inner env is not stepped."""
        return EnvResponse(observation=Observation(text=f"Action blocked: {block.reason}"),
                           info={"error": {"type": "blocked", "message": block.reason}})

    def _finish(self, resp: EnvResponse, obs: Observation, sent: Action | Block,
                received: Observation | None, a_eff: str, t_eff: bool, o_eff: bool) -> EnvResponse:
        """Record this layer's effect in ``info["envh"]`` and return what the policy sees.

        ``received`` is the inner env's observation (``None`` when blocked); when ``obs``
        differs from it, the effect keeps it so a trajectory can show the base observation.
        """
        info = resp.info
        effect = {"layer": self.layer_id, "kind": self.kind, "action": a_eff,
                  "transition": t_eff, "observation": o_eff}
        if a_eff != "passed":
            if a_eff == "blocked":
                effect["reason"] = sent.reason  # type: ignore[union-attr]
            else:
                effect["sent"] = {"tool": sent.tool, "args": thaw(sent.args)}  # type: ignore[union-attr]
        # with no transition override, a changed observation differs from the received one
        if received is not None and obs is not received and ((o_eff and not t_eff) or obs != received):
            effect["observation_before"] = _obs_view(received)
        info.setdefault("envh", []).append(effect)
        self._see(info, obs)
        if obs is not resp.observation:
            resp = _response(obs, resp.reward, resp.terminated, resp.truncated, info)
        return resp

    def observe(self) -> Observation:
        if self._last_obs is not None:
            return self._last_obs
        obs = self.inner.observe()
        if "filter_observation" in self._overrides:
            obs = self.filter_observation(obs, self._state())
        return obs

    def evaluate(self) -> EvaluationResult:
        return self.inner.evaluate()

    def tools(self) -> list[ToolSpec]:
        return self.inner.tools()

    def get_env_state(self) -> dict[str, Any]:
        return self.inner.get_env_state()

    def env_state_schema(self) -> dict[str, Any]:
        return self.inner.env_state_schema()

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        return self.inner.list_tasks(split)

    def notify_replay_start(self) -> None:
        self.on_replay_start()
        self.inner.notify_replay_start()

    def notify_replay_complete(self) -> None:
        self.on_replay_complete()
        self.inner.notify_replay_complete()

    def close(self) -> None:
        self.inner.close()

    @property
    def unwrapped(self) -> ActionableEnv:
        return self.inner.unwrapped

    def save_state(self) -> dict[str, Any]:
        last = self._last_obs
        return {
            "format": "layer", "layer": self.layer_id, "kind": self.kind,
            "inner": self.inner.save_state(), "data": self.layer_state(),
            "last_observation": None if last is None else _obs_data(last),
        }

    def from_state(self, state: Mapping[str, Any]) -> Observation:
        if state.get("format") != "layer" or state.get("kind") != self.kind:
            raise errors.StateError(
                f"Saved layer {state.get('layer')!r} of kind {state.get('kind')!r} does not match "
                f"layer {self.layer_id!r} of kind {self.kind!r}: restore into an env built "
                "from the same spec.")
        obs = self.inner.from_state(state["inner"])
        self.load_layer_state(state.get("data"))
        last = state.get("last_observation")
        self._last_obs = Observation(text=last["text"], data=dict(last.get("data") or {})) if last else obs
        return self._last_obs


def _obs_view(obs: Observation) -> dict[str, Any]:
    """An observation in an effect record: ``data`` is the record's own read-only mapping,
    not a copy (it cannot change, and copying it on every step is most of what a layer
    that rewrites observations costs); the runner's ``jsonable`` turns it into plain JSON."""
    return {"text": obs.text, "data": obs.data}


def _obs_data(obs: Observation) -> dict[str, Any]:
    return {"text": obs.text, "data": thaw(obs.data)}


def hook_view(resp: EnvResponse) -> EnvResponse:
    """The response as a hook sees it: ``info`` (with every layer's effect record) frozen,
    so a hook changes nothing recorded except through its return value."""
    return EnvResponse(observation=resp.observation, reward=resp.reward, terminated=resp.terminated,
                       truncated=resp.truncated, info=_frozen_json(resp.info))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _frozen_json(value: Any) -> Any:
    """A frozen copy of JSON data; anything else a bridge left in ``info`` becomes its
    repr, so no runtime object reaches a hook."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict or t is MappingProxyType or isinstance(value, Mapping):
        return MappingProxyType({str(k): v if type(v) in _SCALARS else _frozen_json(v) for k, v in value.items()})
    if t is list or t is tuple or t is FrozenList or isinstance(value, (list, tuple)):
        return FrozenList([v if type(v) in _SCALARS else _frozen_json(v) for v in value])
    return repr(value)[:2000]


def adopt(out: EnvResponse, live: EnvResponse) -> EnvResponse:
    """A hook's new response, re-attached to the live ``info["envh"]`` effect list. The
    reward is the live one, the very value the benchmark gave: callers have checked that the
    hook's is equal, and equal is not the same (``-0.0`` for ``0.0``, an int for a float)."""
    info = thaw(out.info)
    if "envh" in live.info:
        info["envh"] = live.info["envh"]
    else:
        info.pop("envh", None)
    return EnvResponse(observation=out.observation, reward=live.reward, terminated=out.terminated,
                       truncated=out.truncated, info=info)


type.__setattr__(EnvHarness, "evaluate", _Sealed(EnvHarness.__dict__["evaluate"]))


def record_layer(layer: ActionableEnv, below: ActionableEnv) -> ActionableEnv:
    """Note that ``layer`` was built around ``below`` (``make`` calls this), so a layer that
    swaps its ``inner`` for a proxy is found out and the base bridges stay known."""
    _BUILT_ON[layer] = below
    return layer


def _inner(layer: ActionableEnv) -> ActionableEnv | None:
    """The env a layer was built on, else the one it holds: read from the instance
    ``__dict__``, not through attribute access a component could intercept."""
    built = _BUILT_ON.get(layer)
    if built is not None:
        return built  # type: ignore[no-any-return]
    held = vars(layer).get("inner") if isinstance(layer, EnvHarness) else None
    return held if isinstance(held, ActionableEnv) else None


def base_envs(env: ActionableEnv) -> list[ActionableEnv]:
    """The bridges under a stack, leg 0 first (a chain has one per leg): what verdicts and
    rewards are read from (DESIGN invariant 1), found through what ``make`` recorded."""
    inner = _inner(env)
    if inner is None:
        return [env]
    out = base_envs(inner)
    if type(env) in _COMPOSERS or any(k in _COMPOSERS for k in type(env).__mro__):
        for leg in list(vars(env).get("legs", ()))[1:]:
            out += base_envs(leg)
    return out


def audit_stack(env: ActionableEnv) -> list[str]:
    """What in a stack could change the verdict or the reward behind the sealed hooks: a
    Python component that overrides ``step()`` or ``unwrapped``, patches ``step`` on the
    instance, or holds an ``inner`` other than the env it was built on. Record these with
    the episode; the verdict and reward come from ``base_envs`` regardless."""
    findings: list[str] = []
    layer: ActionableEnv | None = env
    while isinstance(layer, EnvHarness):
        cls, name = type(layer), f"layer {getattr(layer, 'layer_id', '?')!r} ({type(layer).__qualname__})"
        for klass in cls.__mro__:
            if klass is EnvHarness:
                break
            if "step" in klass.__dict__ and klass not in _CORE_STEPS:
                findings.append(f"{name}: step() is overridden in {klass.__qualname__}; its reward "
                                "and flags bypass the sealed hooks")
            if "unwrapped" in klass.__dict__:
                findings.append(f"{name}: unwrapped is overridden in {klass.__qualname__}")
            if "__getattribute__" in klass.__dict__:
                findings.append(f"{name}: __getattribute__ is defined in {klass.__qualname__}; it can "
                                "answer for evaluate() or inner")
        for attr in ("step", "reset", "observe", "unwrapped"):
            if attr in vars(layer):
                findings.append(f"{name}: {attr} is replaced on the instance")
        built = _BUILT_ON.get(layer)
        if built is not None and vars(layer).get("inner") is not built:
            findings.append(f"{name}: inner is not the env the layer was built on (a proxy?)")
        layer = _inner(layer)
    return findings


def iter_layers(env: ActionableEnv) -> list[ActionableEnv]:
    """The stack from outermost to the base env (for tools, not for policies)."""
    out = [env]
    while isinstance(out[-1], EnvHarness):
        out.append(out[-1].inner)
    return out
