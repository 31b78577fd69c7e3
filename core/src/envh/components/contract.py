"""Contract: the rules axis. f_A rewrites or blocks actions, f_T overrides transitions,
f_O masks or augments observations.

Authored either as a Python class (a plugin's ``EnvHarness`` subclass, named by import
path in ``cls``) or as untrusted source code (``code``) defining any of::

    def filter_action(action, state, memo): ...            # -> Action | Block | None
    def modify_transition(action, response, state, memo): ...  # -> EnvResponse | None
    def filter_observation(observation, state, memo): ...  # -> Observation | str | None

``None`` means "unchanged". ``memo`` is a dict of JSON data that lives for one episode.
The code sees only ``envh.capabilities`` (an allow-list of functions, immutable records);
violations, runtime errors, timeouts and crashes raise ``ContractCodeError``. The tier
comes from the caller of ``envh.make``: code runs in the jail process (``envh.jail``)
unless ``make(spec, trust="trusted")`` puts it in this process; a layer's or a spec's
``trust: untrusted`` lowers the tier, its ``trust: trusted`` raises nothing. Unless the call
is trusted, a ``cls`` must be a class of an installed plugin that declares ``spec_safe =
True`` (its plugin checks every option as untrusted data: options run in this process).
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

import attrs

from .. import errors
from ..capabilities import record_factories
from ..env import ActionableEnv
from ..harness import _VERDICT_COMPOSER, EnvHarness, adopt, hook_view
from ..jail import wire
from ..jail.process import NOT_RUN, memo_of
from ..plugins.records import resolve
from ..sandbox import Sandbox
from ..spec import BuildContext, LayerSpec
from ..stateview import LazyState, check_plain
from ..types import Action, Block, EnvResponse, Observation, ResetResult, _observation

HOOKS = ("filter_action", "modify_transition", "filter_observation")
TRUST_LEVELS = ("trusted", "untrusted")
MAX_OPS = 200_000
MAX_UNTRUSTED_TIME_LIMIT = 5.0  # seconds; a jailed call is killed past this plus a grace


@attrs.frozen(kw_only=True)
class ContractSpec(LayerSpec):
    """Exactly one of ``code`` (untrusted source) or ``cls`` (``"module:Class"``)."""

    kind: Literal["contract"] = "contract"
    code: str | None = None
    cls: str | None = None
    config: dict[str, Any] = attrs.field(factory=dict)
    time_limit_ms: float = attrs.field(default=250.0, validator=attrs.validators.gt(0))
    trust: Literal["trusted", "untrusted"] = "trusted"

    def __attrs_post_init__(self) -> None:
        if (self.code is None) == (self.cls is None):
            raise ValueError("a contract needs exactly one of 'code' or 'cls'")


class CodeContract(EnvHarness, _core_step=_VERDICT_COMPOSER):
    """A contract whose hooks are contract code: in-process for ``trust="trusted"``, in the
    jail process (``envh.jail``) for ``trust="untrusted"``. Both tiers see the same
    capabilities and give the same answers; only the containment differs."""

    kind = "contract"

    def __init__(self, inner: ActionableEnv, code: str, *, time_limit: float = 0.25,
                 layer_id: str | None = None, trust: str = "untrusted", jail: Any = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        if trust not in TRUST_LEVELS:
            raise errors.SpecError(f"trust must be one of {', '.join(TRUST_LEVELS)}, got {trust!r}")
        if trust == "untrusted":  # the limit comes from the same untrusted spec: cap it
            time_limit = min(time_limit, MAX_UNTRUSTED_TIME_LIMIT)
        self.code, self.trust, self.time_limit = code, trust, time_limit
        defined, self._reads_state = analyse(code)
        self._reads_info = self._reads_state.pop("info")
        if not defined:
            raise errors.ContractCodeError(
                "the code defines none of filter_action, modify_transition, filter_observation")
        self.memo: dict[str, Any] = {}
        self._jail: Any = None
        self._program: int | None = None
        self.fns: dict[str, Any] = dict.fromkeys(HOOKS)
        if trust == "trusted":
            self.sandbox: Sandbox | None = Sandbox(code, names=record_factories(), time_limit=time_limit,
                                                   allowed_functions=HOOKS)
            self.fns.update({h: self.sandbox.function(h) for h in defined})
        else:
            self.sandbox = None
            self._jail = jail or _stack_jail(inner)
            self._program = self._jail.load(code, HOOKS, time_limit=time_limit, max_ops=MAX_OPS)
            # a stack dropped unclosed leaves the spec's shared jail its program otherwise
            self._unloader = weakref.finalize(self, self._jail.drop, self._program)
            self.fns.update({h: h for h in defined})
        self._overrides = frozenset({"on_reset", *defined})  # type: ignore[misc]
        self._needs_state = any(self._reads_state.values())

    # -- calling hooks -------------------------------------------------------------------------
    def _call(self, hook: str, first: Any, state: Any) -> Any:
        """Run a two-record hook (filter_action / filter_observation) in this tier."""
        if self.sandbox is not None:
            return self.sandbox.call3(self.fns[hook], hook, first, state, self.memo)
        return self._jailed(hook, [wire.encode(first)])

    def _jailed(self, hook: str, args: list[Any]) -> Any:
        if self._program is None:
            raise errors.ContractCodeError("the contract was closed; build the env again", hook=hook)
        state = _state_data(self.inner) if self._reads_state.get(hook) else None
        with self._memo_left_by_failure():
            out, self.memo = self._jail.call(self._program, hook, args, state, self.memo, self.time_limit)
        return out

    @contextmanager
    def _memo_left_by_failure(self) -> Iterator[None]:
        """Around a call to the jail: a call that fails keeps what its hooks changed in the
        memo before failing, as the trusted tier's in-place memo does (``memo_of``)."""
        try:
            yield
        except errors.ContractCodeError as exc:
            left = memo_of(exc)
            self.memo = self.memo if left is None else left
            raise

    def step(self, action: Action) -> EnvResponse:
        """The generic harness step with the contract's hooks inlined: this layer sits on
        hot paths and its cost is measured (bench/step_overhead.py)."""
        if type(action) is not Action:
            return super().step(action)
        sb = self.sandbox
        if sb is None:
            return self._step_jailed(action)
        fns, memo, call3 = self.fns, self.memo, sb.call3
        state = LazyState(self.inner) if self._needs_state else None
        a_eff, sent, t_eff, o_eff = "passed", action, False, False
        fn = fns["filter_action"]
        if fn is not None:
            out = call3(fn, "filter_action", action, state, memo)
            if out is not None and out is not action:
                a_eff, sent = _action_effect(out, action)
        if a_eff == "blocked":
            received = None
            resp = self._blocked(sent)  # type: ignore[arg-type]
        else:
            resp = self.inner.step(sent)  # type: ignore[arg-type]
            received = resp.observation
            if state is not None:
                state._data = None
            fn = fns["modify_transition"]
            if fn is not None:
                view = hook_view(resp) if self._reads_info else resp
                out = sb.call4(fn, "modify_transition", sent, view, state, memo)
                if out is not None and out is not view:
                    new = self._transition(out, resp)
                    if new is not resp:
                        t_eff, resp = True, new
        obs = resp.observation
        fn = fns["filter_observation"]
        if fn is not None:
            new_obs = call3(fn, "filter_observation", obs, state, memo)
            if new_obs is not None and new_obs is not obs:
                if type(new_obs) is str:
                    o_eff = new_obs != obs.text
                    new_obs = _observation(new_obs, obs.data)
                elif type(new_obs) is Observation:
                    o_eff = new_obs != obs
                else:
                    raise _wrong(new_obs, "Observation, str or None", "filter_observation")
                obs = new_obs
        return self._finish(resp, obs, sent, received, a_eff, t_eff, o_eff)

    def _step_jailed(self, action: Action) -> EnvResponse:
        """``step`` for the untrusted tier: two round trips to the jail at most,
        ``filter_action`` before the benchmark's step, then ``modify_transition`` and
        ``filter_observation`` together (``_after_step``)."""
        fns = self.fns
        a_eff, sent, t_eff, o_eff = "passed", action, False, False
        if fns["filter_action"] is not None:
            out = self._call("filter_action", action, None)
            if out is not None and out is not action:
                a_eff, sent = _action_effect(out, action)
        if a_eff == "blocked":
            received = None
            resp = self._blocked(sent)  # type: ignore[arg-type]
        else:
            resp = self.inner.step(sent)  # type: ignore[arg-type]
            received = resp.observation
            if fns["modify_transition"] is not None and fns["filter_observation"] is not None:
                # both hooks after the step in one round trip to the jail
                resp, t_eff, new_obs = self._after_step(sent, resp)  # type: ignore[arg-type]
                obs = resp.observation
                if new_obs is not obs:
                    o_eff, obs = new_obs != obs, new_obs
                return self._finish(resp, obs, sent, received, a_eff, t_eff, o_eff)
            if fns["modify_transition"] is not None:
                new = self.modify_transition(sent, resp, None)  # type: ignore[arg-type]
                if new is not resp:
                    t_eff, resp = True, new
        obs = resp.observation
        if fns["filter_observation"] is not None:
            new_obs = self.filter_observation(obs, None)  # type: ignore[arg-type]
            if new_obs is not obs:
                o_eff = new_obs != obs
                obs = new_obs
        return self._finish(resp, obs, sent, received, a_eff, t_eff, o_eff)

    def _after_step(self, action: Action, response: EnvResponse) -> tuple[EnvResponse, bool, Observation]:
        """``modify_transition`` then ``filter_observation`` in the jail, in one exchange;
        each answer checked as the separate hooks check theirs. The response, whether the
        transition changed, and the observation to show."""
        if self._program is None:
            raise errors.ContractCodeError("the contract was closed; build the env again", hook="modify_transition")
        reads = self._reads_state
        state = _state_data(self.inner) if reads.get("modify_transition") or reads.get("filter_observation") \
            else None
        sent = wire.encode(response)
        with self._memo_left_by_failure():
            out, then, self.memo = self._jail.call_then(self._program, "modify_transition",
                                                        [wire.encode(action), sent], "filter_observation",
                                                        state, self.memo, self.time_limit)
        new = response
        if out is not None and not (type(out) is EnvResponse and wire.encode(out) == sent):
            new = self._transition(out, response)
        if then is NOT_RUN:  # the jail skips it only where the host refuses the first answer
            raise errors.ContractCodeError("the jail did not run filter_observation", hook="filter_observation")
        return new, new is not response, self._observed(then, new.observation)

    def on_reset(self, result: ResetResult) -> ResetResult:
        self.memo = {}
        return result

    def filter_action(self, action: Action, state: Mapping[str, Any]) -> Action | Block:
        out = self._call("filter_action", action, state)
        if out is None or type(out) is Action or type(out) is Block:
            return action if out is None else out
        raise _wrong(out, "Action, Block or None", "filter_action")

    def modify_transition(self, action: Action, response: EnvResponse,
                          state: Mapping[str, Any]) -> EnvResponse:
        """The hook sees a frozen copy of the response (effect records included); only
        what it returns counts, and never a different reward."""
        if self.sandbox is not None:
            view = hook_view(response) if self._reads_info else response
            out = self.sandbox.call4(self.fns["modify_transition"], "modify_transition",
                                     action, view, state, self.memo)
            if out is None or out is view:
                return response
        else:
            sent = wire.encode(response)
            out = self._jailed("modify_transition", [wire.encode(action), sent])
            if out is None:
                return response
            if type(out) is EnvResponse and wire.encode(out) == sent:
                return response
        return self._transition(out, response)

    @staticmethod
    def _transition(out: Any, response: EnvResponse) -> EnvResponse:
        """A transition hook's answer checked: an ``EnvResponse`` with the same reward,
        re-attached to the live effect list (``response`` itself when nothing changed)."""
        if type(out) is not EnvResponse:
            raise _wrong(out, "EnvResponse or None", "modify_transition")
        if out.reward != response.reward:
            raise errors.ContractCodeError(
                "changed the reward; rewards come from the benchmark's verifier and are sealed. "
                "Change the observation or flags instead.", hook="modify_transition")
        if out == response:
            return response
        return adopt(out, response)

    def filter_observation(self, observation: Observation, state: Mapping[str, Any]) -> Observation:
        return self._observed(self._call("filter_observation", observation, state), observation)

    @staticmethod
    def _observed(out: Any, observation: Observation) -> Observation:
        """``filter_observation``'s answer ``out`` to ``observation``, checked."""
        if out is None:
            return observation
        if type(out) is str:
            return Observation(text=out, data=observation.data)
        if type(out) is Observation:
            return out
        raise _wrong(out, "Observation, str or None", "filter_observation")

    def layer_state(self) -> Any:
        try:
            return json.loads(json.dumps(self.memo, default=_plain))
        except (TypeError, ValueError) as exc:
            raise errors.StateError(
                f"contract {self.layer_id!r}: memo is not JSON data and cannot be saved: {exc}") from exc

    def load_layer_state(self, data: Any) -> None:
        # a deep copy: hooks change memo in place, and the snapshot must restore the same
        # memo however often it is loaded
        self.memo = json.loads(json.dumps(dict(data or {}), default=_plain))

    def close(self) -> None:
        if self._program is not None:
            self._unloader.detach()
            self._jail.unload(self._program)
            self._program = None
        super().close()


def plugin_code(module: str, registry: Any) -> bool:
    """Whether ``module`` belongs to a plugin loaded in ``registry`` (installed code, as
    trusted as envh: importing it runs nothing new). envh's own classes are not plugin
    code here: some take options only a trusted caller may set (``CodeContract``'s tier, a
    workspace's path)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", module):
        return False
    packages = {getattr(p, "__name__", "").partition(".")[0] for p in registry.pm.get_plugins()}
    return module.partition(".")[0] in packages - {"", "envh"}


def _stack_jail(inner: ActionableEnv) -> Any:
    """The jail of the contract layers below in this stack, else one of its spec's jails
    (``envh.jail.stack_jail``): a spec's untrusted code, chain legs included, runs in at
    most its share of jail processes, never in another spec's."""
    from ..harness import iter_layers
    from ..jail import stack_jail

    for layer in iter_layers(inner):
        held = vars(layer).get("_jail") if isinstance(layer, CodeContract) else None
        if held is not None and held.idle_exit:
            return held
    return stack_jail(inner)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _action_effect(out: Any, action: Action) -> tuple[str, Any]:
    """What an action hook's answer (not None, not ``action`` itself) does: ``blocked``
    (with the Block), ``rewritten`` (with the new action) or ``passed``."""
    if type(out) is Block:
        return "blocked", out
    if type(out) is Action:
        return ("rewritten", out) if out != action else ("passed", action)
    raise _wrong(out, "Action, Block or None", "filter_action")


def _wrong(out: Any, expected: str, hook: str) -> errors.ContractCodeError:
    name = out.type_name if isinstance(out, wire.Foreign) else type(out).__name__
    return errors.ContractCodeError(f"must return {expected}; got {name}", hook=hook)


def _state_data(env: ActionableEnv) -> Any:
    data = env.get_env_state()
    if type(data) is not dict:
        raise errors.StateError("get_env_state() must return a dict")
    check_plain(data)  # both tiers refuse a state that is not JSON data, with the same words
    return data


def analyse(code: str) -> tuple[tuple[str, ...], dict[str, bool]]:
    """Check ``code`` without running it: the hooks it defines, and for each whether it
    ever reads its ``state`` parameter (a hook that does not is handed ``None``, and no
    state is fetched). Raises ``ContractCodeError`` at the first problem."""
    import ast

    from ..sandbox import check_top_level, parse_and_check

    tree = parse_and_check(code)
    check_top_level(tree, set(HOOKS))
    defined, reads = [], {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in HOOKS:
            defined.append(node.name)
            position = 2 if node.name == "modify_transition" else 1
            params = node.args.posonlyargs + node.args.args
            name = params[position].arg if position < len(params) else None
            reads[node.name] = name is not None and any(
                isinstance(n, ast.Name) and n.id == name for b in node.body for n in ast.walk(b))
    # ``.info`` written out is the only way code reaches a response's info dict (no
    # getattr, no asdict): code without it is handed the live response, uncopied. A class
    # pattern (``case T(info=i)``, or positionally through ``__match_args__``) reads
    # attributes too; no record class is reachable today, but such code gets the copy anyway
    reads["info"] = any((isinstance(n, ast.Attribute) and n.attr == "info") or isinstance(n, ast.MatchClass)
                        for n in ast.walk(tree))
    return tuple(dict.fromkeys(defined)), reads


def check_contract_code(code: str, *, trust: str = "untrusted", time_limit: float = 0.25) -> tuple[str, ...]:
    """Check contract code the way ``make`` would build it, without an env: static checks,
    then its top level run in the tier ``trust`` names (the jail by default, so nothing
    the code does at build time touches this process). The hooks it defines; raises
    ``ContractCodeError`` with line and column on the first problem."""
    defined, _ = analyse(code)
    if not defined:
        raise errors.ContractCodeError(
            "the code defines none of filter_action, modify_transition, filter_observation")
    if trust == "trusted":
        Sandbox(code, names=record_factories(), time_limit=time_limit, allowed_functions=HOOKS)
    else:
        from ..jail import Jail

        jail = Jail()  # a process of its own, ended by the unload
        try:
            jail.unload(jail.load(code, HOOKS, time_limit=time_limit, max_ops=MAX_OPS))
        finally:
            jail.close()
    return defined


def _not_plugin_class(layer_id: str, cls: Any) -> errors.SpecError:
    """Why an untrusted spec's contract ``cls`` is refused: importing a module runs its
    code in this process."""
    return errors.SpecError(
        f"contract {layer_id!r}: {cls!r} is not a contract class of an installed plugin, and this spec "
        "is not trusted. Give the hooks as 'code', or build it with trust='trusted' (--trust-code) if you "
        "trust it as you would trust importing that module.")


def build(spec: ContractSpec, inner: ActionableEnv, ctx: BuildContext) -> EnvHarness:
    layer_id = spec.id or f"{ctx.index}:contract"
    trust = "trusted" if spec.trust == "trusted" and getattr(ctx, "trust", "untrusted") == "trusted" else "untrusted"
    if spec.code is not None:
        return CodeContract(inner, spec.code, time_limit=spec.time_limit_ms / 1000, layer_id=layer_id,
                            trust=trust)
    if trust == "untrusted" and not plugin_code(str(spec.cls).partition(":")[0], ctx.registry):
        raise _not_plugin_class(layer_id, spec.cls)
    cls = resolve(spec.cls)  # type: ignore[arg-type]
    if not (isinstance(cls, type) and issubclass(cls, EnvHarness)):
        raise errors.SpecError(f"contract cls {spec.cls!r} is not an envh.EnvHarness subclass")
    if trust == "untrusted" and not plugin_code(cls.__module__, ctx.registry):
        # a plugin module's name for a class of envh's own (CodeContract takes a tier)
        raise _not_plugin_class(layer_id, spec.cls)
    if trust == "untrusted" and cls.__dict__.get("spec_safe") is not True:
        raise errors.SpecError(
            f"contract {layer_id!r}: {spec.cls!r} does not declare its options safe to take from an untrusted "
            "spec (a class attribute spec_safe = True, set by its plugin once every option is checked as "
            "untrusted data). Build it with trust='trusted' (--trust-code) if you trust this spec.")
    try:
        return cls(inner, layer_id=layer_id, **spec.config)  # type: ignore[call-arg]
    except (TypeError, ValueError) as exc:  # options the class refuses: the spec's error
        raise errors.SpecError(f"contract {layer_id!r}: bad config for {spec.cls!r}: {exc}") from exc
