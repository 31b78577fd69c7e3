"""A generic template with a continuous knob, for any bridge with a reference solution.

``guide`` (scaffold): a trusted contract (``GuideContract``) that follows the bridge's
reference solution *from the current state*; when the policy's action is off the
reference, it is replaced by the reference's next step with probability ``m``. The draws
are seeded per episode (task, episode seed, number of the focused action) and shared across rates, so
an episode replays exactly and a higher rate replaces a superset of what a lower one did.
At ``m = 0`` nothing changes; at ``m = 1`` every off-reference action is answered by the
reference, so the task is solved whatever the policy does. In between the success rate
moves with ``m``, so the designer searches it on the measured response (secant between
measured points, kept inside the bisection interval) instead of stepping a list index.

The reference is the base bridge's ``reference_actions()`` (core's ``Bridge`` contract: a
known winning action sequence from the bridge's current state: Toy24's solver, ALFWorld's
planner, SWE-bench's gold patch). It is asked again whenever the episode left it (an
off-reference action passed, a step was refused or errored), never taken from a plan fixed
at the start: after the policy's own detour the "next step" of the start's plan names
positions or objects that no longer exist (Toy24: a ``bad_position`` error the diagnosis
would blame on the policy). Where the bridge has no reference from here (a dead end, an
ALFWorld stage off every plan) the guide passes actions untouched.

With a ``focus`` the replacements concentrate where the weakness is: only off-reference
actions that match it (a tool, a pattern over the JSON arguments, an action the episode
already took) are candidates for replacement; the others pass untouched. An ``expected``
focus (``{"expected": {"tools": [...], "pattern": ...}}``) matches the *reference's* next
step instead: the policy's action is replaced only where the reference plays the class
the divergence diagnosis found the policy slipping on (``divergence.py``). The designer takes
the focus from the weakness predicate that bites most in the failed episodes (``focus_for``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from envh import Action, ActionableEnv, Block, EnvHarness, EnvResponse, ResetResult, TaskRef

from .weakness import _risky_focus, focus_matcher

SUBMIT_TOOLS = ("submit", "stop", "finish", "answer")


def reference_from_here(env: ActionableEnv) -> list[Action] | None:
    """The base bridge's reference solution from its current state (``None``: none from here).
    A reference that cannot be computed is no reference."""
    return reference_or_error(env)[0]


def reference_or_error(env: ActionableEnv) -> tuple[list[Action] | None, str]:
    """(the reference from here or ``None``, the error that computing it raised or "")."""
    ref = getattr(env.unwrapped, "reference_actions", None)
    if not callable(ref):
        return None, ""
    try:
        plan = ref()
    except Exception as exc:  # noqa: BLE001 - a bridge's reference code may fail in any way
        return None, f"{type(exc).__name__}: {exc}"[:300]
    return (None if plan is None else list(plan)), ""


def _call(action: Action) -> str:
    return action.tool + json.dumps(_plain(action.args), sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class GuideContract(EnvHarness):
    """Contract class (``cls: envh_rigger.guidance:GuideContract``, ``config: {rate, focus}``)."""

    kind = "contract"
    #: its options may come from an untrusted spec: the focus patterns run in this process,
    #: by RE2 (linear time, ``weakness.compile_pattern``), and are at most 200 characters
    spec_safe = True

    def __init__(self, inner: ActionableEnv, *, layer_id: str | None = None, rate: float = 0.0,
                 focus: Mapping[str, Any] | None = None, salt: str = "guide") -> None:
        super().__init__(inner, layer_id=layer_id)
        rate = float(rate)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"guide rate must be in [0, 1], got {rate}")
        self.rate, self.salt = rate, str(salt)
        self.focus = dict(focus or {})
        expected = self.focus.get("expected")
        for where, pattern in (("focus", self.focus.get("pattern")),
                               ("focus.expected", expected.get("pattern") if isinstance(expected, Mapping) else None)):
            why = _risky_focus(pattern) if pattern is not None else None
            if why:
                raise ValueError(f"guide {where} pattern {str(pattern)[:80]!r} {why}")
        self._pattern = focus_matcher(self.focus["pattern"]) if self.focus.get("pattern") else None
        self._expected_pattern = focus_matcher(expected["pattern"]) \
            if isinstance(expected, Mapping) and expected.get("pattern") else None
        self._episode, self._decisions = "", 0
        self._seen: list[str] = []
        self._plan: list[Action] | None = None  # the reference from here while the episode follows it

    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> ResetResult:
        self._episode, self._decisions, self._seen, self._plan = f"{self.salt}|{task}|{seed}", 0, [], None
        return super().reset(task=task, seed=seed, options=options)

    def _in_focus(self, action: Action, call: str) -> bool:
        tools = self.focus.get("tools")
        if tools and action.tool not in tools:
            return False
        if self._pattern is not None and not self._pattern(json.dumps(_plain(action.args), sort_keys=True)):
            return False
        if self.focus.get("repeats"):
            return call in self._seen
        return True

    def _expected_in_focus(self, call: str) -> bool:
        """With an ``expected`` focus: the reference's next step from here is of the focused
        class (the policy's action is off it), so the policy is about to slip there."""
        spec = self.focus.get("expected")
        if not spec:
            return True
        plan = self._plan if self._plan else reference_from_here(self.inner)
        self._plan = plan or None
        if not plan or _call(plan[0]) == call:
            return False
        step = plan[0]
        if spec.get("tools") and step.tool not in spec["tools"]:
            return False
        pattern = self._expected_pattern
        return pattern is None or pattern(json.dumps(_plain(step.args), sort_keys=True))

    def filter_action(self, action: Action, state: Mapping[str, Any]) -> Action | Block:
        call = _call(action)
        focused = self._in_focus(action, call) and self._expected_in_focus(call)
        self._seen.append(call)
        if not focused or self.rate <= 0.0:  # never replaced: no reference is asked (a planner costs)
            self._plan = self._plan[1:] if self._plan and _call(self._plan[0]) == call else None
            return action
        # the draw first: an action that will pass either way costs no reference (a planner run)
        draw = random.Random(f"{self._episode}|{self._decisions}").random()
        self._decisions += 1
        if draw >= self.rate:
            self._plan = self._plan[1:] if self._plan and _call(self._plan[0]) == call else None
            return action
        plan = self._plan if self._plan else reference_from_here(self.inner)
        if not plan:  # no reference from here: nothing to guide toward
            self._plan = None
            return action
        step, rest = plan[0], plan[1:]
        self._plan = rest
        if _call(step) == call:
            return action
        return Action(tool=step.tool, args=_plain(step.args))

    def modify_transition(self, action: Action, response: EnvResponse, state: Mapping[str, Any]) -> EnvResponse:
        if response.info.get("error") or response.info.get("blocked") or response.terminated or response.truncated:
            self._plan = None  # the step did not go as the reference said: ask again
        return response

    def layer_state(self) -> Any:
        return {"episode": self._episode, "decisions": self._decisions, "seen": list(self._seen)}

    def load_layer_state(self, data: Any) -> None:
        if isinstance(data, Mapping):
            self._episode, self._decisions = str(data.get("episode", "")), int(data.get("decisions", 0))
            self._seen = [str(c) for c in data.get("seen", [])]
        self._plan = None


def builtin_focus(predicate: str) -> dict[str, Any] | None:
    """Where a built-in weakness predicate acts, as a guide focus (``None``: everywhere)."""
    name, *args = predicate.split(":")
    if name in ("stops-early", "submits-before-test"):
        return {"tools": list(SUBMIT_TOOLS)}
    if name == "repeats":
        return {"repeats": True}
    if name == "calls" and args:
        return {"tools": [args[0]], **({"pattern": args[1]} if len(args) > 1 and args[1] else {})}
    return None


def focus_for(weaknesses: list[Any], failed: list[Any], won: list[Any]) -> tuple[dict[str, Any] | None, str]:
    """The focus of the weakness that separates failures from wins best: the predicate
    (each with ``shows(t)`` and ``focus``) showing in the largest share of ``failed``
    episodes beyond its share of ``won`` ones. ``(None, "")`` when none shows more in
    failures or none has a focus."""
    best, score = None, 0.0
    for w in weaknesses:
        if w.focus is None or not failed:
            continue
        lift = sum(w.shows(t) for t in failed) / len(failed) - (sum(w.shows(t) for t in won) / len(won) if won else 0)
        if lift > score + 1e-9:
            best, score = w, lift
    return (dict(best.focus), best.predicate) if best is not None else (None, "")


class Guide:
    """Replace off-reference actions (focused ones) by the reference's next step from the
    current state, each with probability ``m``."""

    name = "guide"
    direction = "scaffold"
    axis = "A"
    continuous = True

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[float]:
        return [0.25, 0.5, 0.75, 1.0] if reference_from_here(env) else []

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any,
                    focus: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        rate = min(1.0, max(0.0, float(magnitude)))
        config: dict[str, Any] = {"rate": rate}
        if focus:
            config["focus"] = dict(focus)
        return [{"kind": "contract", "id": f"guide-{rate:.3f}" + ("-focus" if focus else ""),
                 "cls": "envh_rigger.guidance:GuideContract", "config": config}]
