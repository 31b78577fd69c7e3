"""Reading reward and verdict at the base bridges of a stack, never through the wrappers.

The verifier is sealed (DESIGN invariant 1), but a Python component is arbitrary code: it
can override ``step()`` to change the reward, or put a proxy between itself and the env
below. So the runner does not trust what the outermost layer reports. ``audit`` is
``envh.harness.audit_stack``'s account of such components, recorded on trajectories. A
``BaseTap``
wraps the ``step`` and ``evaluate`` of each base env (the innermost env of the stack, and
of every chain leg) on the instance, and records what they returned: the step's reward is
the sum of the base rewards it caused, and the verdict is the base bridge's own
``evaluate()`` (for a chain, the chain's composition of its legs' base verdicts). The
stack's own answer is kept beside it when it differs, so a component that changed it is
visible in the trajectory.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from .. import errors
from ..components.chain import Chain
from ..harness import EnvHarness, audit_stack
from ..harness import _inner as built_on
from ..types import EvaluationResult

_TAPPED = "_envh_tap"


def _tree(env: Any) -> tuple[Any, ...]:
    """``("base", env)`` or ``("chain", chain_layer, [subtree per leg])``, walking the envs
    each layer was built on (``make`` records them), so a component that swapped its
    ``inner`` for a proxy cannot pass the proxy off as the base."""
    layer = env
    while isinstance(layer, EnvHarness):
        below = built_on(layer)
        if isinstance(layer, Chain):
            return ("chain", layer, [_tree(leg) for leg in [below, *list(vars(layer).get("legs", ()))[1:]]])
        if below is None:
            break
        layer = below
    return ("base", layer)


def _bases(node: tuple[Any, ...]) -> list[Any]:
    if node[0] == "base":
        return [node[1]]
    return [b for child in node[2] for b in _bases(child)]


class _Leg:
    """A chain leg as the chain's composition sees it: its base verdict."""

    def __init__(self, tap: BaseTap, node: tuple[Any, ...], check: Callable[..., EvaluationResult]) -> None:
        self.tap, self.node, self.check = tap, node, check

    def evaluate(self) -> EvaluationResult:
        return self.tap._compose(self.node, self.check)


class _ChainView:
    def __init__(self, legs: list[_Leg], started: list[bool]) -> None:
        self.legs, self.started = legs, started


def _replaced(base: Any) -> list[str]:
    """Findings for a base env whose class's ``step``/``evaluate`` is no longer the one its
    class body (or module) defined: code patched the class at run time (e.g. a component
    at build), and the tap, installed after the build, reads the patched method."""
    out = []
    for name in ("step", "evaluate"):
        for owner in type(base).__mro__:
            if name in vars(owner):
                fn = vars(owner)[name]
                if getattr(fn, "__module__", None) != owner.__module__ and \
                        getattr(fn, "__qualname__", None) != f"{owner.__qualname__}.{name}":
                    out.append(f"{owner.__qualname__}.{name}() of the base env was replaced at run time by "
                               f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}")
                break
    return out


class BaseTap:
    """Taps on the base envs of one stack; ``active`` is False when one could not be
    installed (then the runner falls back to the stack's own answers)."""

    def __init__(self, env: Any) -> None:
        self.root = _tree(env)
        self.rewards: list[Any] = []
        self.seen: dict[int, Any] = {}
        self.active = True
        # the bases' own evaluate(), kept here, not on the instance, where a component
        # could overwrite it by name
        self._evaluate: dict[int, Callable[[], Any]] = {}
        for base in _bases(self.root):
            try:
                self._install(base)
            except (AttributeError, TypeError):
                self.active = False

    def _install(self, base: Any) -> None:
        current = base.__dict__.get("step")
        if getattr(current, _TAPPED, None) is self:
            return
        step, evaluate = type(base).step.__get__(base), type(base).evaluate.__get__(base)
        tap = self

        def tapped_step(action: Any) -> Any:
            resp = step(action)
            tap.rewards.append(getattr(resp, "reward", None))
            return resp

        def tapped_evaluate() -> Any:
            verdict = evaluate()
            tap.seen[id(base)] = verdict
            return verdict

        setattr(tapped_step, _TAPPED, self)
        base.step, base.evaluate = tapped_step, tapped_evaluate
        self._evaluate[id(base)] = evaluate

    @staticmethod
    def audit(env: Any) -> list[str]:
        """What in the stack could change verdict or reward, now (a layer may swap its
        ``inner`` at reset)."""
        try:
            return audit_stack(env) + [f for base in _bases(_tree(env)) for f in _replaced(base)]
        except Exception as exc:  # noqa: BLE001 - an audit that fails is itself a finding
            return [f"the stack could not be audited: {type(exc).__name__}"]

    def begin_step(self) -> list[Any]:
        self.rewards = []
        return self.rewards

    @staticmethod
    def base_reward(rewards: list[Any]) -> float:
        total = 0.0
        for reward in rewards:
            if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
                raise errors.EnvError(f"the base env's step() returned reward={reward!r:.80}; a reward is a "
                                      "finite number")
            total += float(reward)
        return total

    def verdict(self, env: Any, check: Callable[..., EvaluationResult]) -> tuple[EvaluationResult, Any]:
        """(the base verdict, the stack's own verdict when it differs, else ``None``)."""
        self.seen.clear()
        try:
            outer: Any = check(env.evaluate(), "the stack's evaluate()")
        except Exception as exc:  # noqa: BLE001 - the base verdict decides; this is only recorded
            try:
                message = f"{type(exc).__name__}: {exc}"[:2000]
            except Exception:  # noqa: BLE001 - an exception whose message cannot be read
                message = type(exc).__name__
            outer = EvaluationResult(success=False, score=0.0, metrics={
                "error": f"the stack's evaluate() failed: {message}"})
        base = self._compose(self.root, check)
        return base, (None if outer == base else outer)

    def _compose(self, node: tuple[Any, ...], check: Callable[..., EvaluationResult]) -> EvaluationResult:
        if node[0] == "base":
            env = node[1]
            seen = self.seen.get(id(env))
            if seen is None:
                seen = self._evaluate[id(env)]()
            return check(seen, f"{type(env).__name__}.evaluate()")
        chain = node[1]
        view = _ChainView([_Leg(self, child, check) for child in node[2]], list(chain.started))
        return check(Chain.evaluate(view), "the chain's composition")  # type: ignore[arg-type]
