"""Toy24 templates for the template designer (core contributes them through
``envh_templates`` with ``bridge="toy24"``, as a bridge plugin does).

* ``ReplayPlan`` (scaffold): a stage replaying the first n combine steps of the solver's
  plan, so the policy starts closer to 24.
* ``ReplayPlanAutoStop`` (scaffold): for policies that never call ``stop()``: a contract that
  turns the next action into ``stop`` once a number equals the target, plus a stage of the
  first n plan steps (n from 0).
* ``ReplayPlanAutoStopHint`` (scaffold): the same, plus a hint naming the plan's next
  step in every observation along the plan — a finer scale for policies that can copy.
* ``BlockOperator`` (pressure): a contract blocking operators that one known solution
  does not use, so the task stays solvable.
* ``HideNumber`` (pressure): a contract hiding the first n numbers of the observation.

All three read the bridge's oracle (``env.unwrapped.solve()``) and state only.
"""

from __future__ import annotations

from typing import Any

from ..env import ActionableEnv
from ..types import Action, TaskRef

OPS = ("add", "sub", "mul", "div")


def _plan(env: ActionableEnv) -> list[Action]:
    solve = getattr(env.unwrapped, "solve", None)
    plan = solve() if callable(solve) else None
    return list(plan or [])


def _combines(env: ActionableEnv) -> list[Action]:
    return [a for a in _plan(env) if a.tool == "combine"]


def _stage(layer_id: str, actions: list[Action]) -> dict[str, Any]:
    return {"kind": "stage", "id": layer_id,
            "actions": [{"tool": a.tool, "args": dict(a.args)} for a in actions]}


class ReplayPlan:
    """Stage the first n steps of the solver's plan; n from 1 to all combine steps."""

    name = "toy24.replay-plan"
    direction = "scaffold"
    axis = "S0"
    first = 1

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return list(range(self.first, len(_combines(env)) + 1))

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [_stage(f"replay-plan-{magnitude}", _combines(env)[: int(magnitude)])]


AUTO_STOP_CODE = '''
def filter_action(action, state, memo):
    if state["reached_target"] and action.tool != "stop":
        return Action(tool="stop", args={})
    return None
'''


class ReplayPlanAutoStop(ReplayPlan):
    """Stop automatically at the target, after a stage of the plan's first n steps."""

    name = "toy24.replay-plan-autostop"
    axis = "A"  # it rewrites the policy's actions: the answer to "the policy misuses the tools"
    first = 0

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        actions = _combines(env)[: int(magnitude)]
        layers: list[dict[str, Any]] = [{"kind": "contract", "id": "auto-stop", "code": AUTO_STOP_CODE}]
        if actions:
            layers.insert(0, _stage(f"replay-plan-autostop-{magnitude}", actions))
        return layers


HINT_CODE = AUTO_STOP_CODE + '''
HINTS = __HINTS__


def filter_observation(observation, state, memo):
    hint = HINTS.get(",".join(state["numbers"]))
    if hint is None:
        return None
    return observation.text + "\\nHint: a good next step is " + hint
'''


def _hints(env: ActionableEnv) -> dict[str, str]:
    """Numbers (as the state shows them) → the plan's next call, along the solver's plan."""
    from fractions import Fraction

    from .toy24 import fmt
    from .toy24_solver import combine

    numbers = [Fraction(x) for x in env.get_env_state()["numbers"]]
    hints = {}
    for a in _plan(env):
        if a.tool != "combine":
            break
        i, j, op = a.args["i"], a.args["j"], a.args["op"]
        hints[",".join(fmt(x) for x in numbers)] = f"combine({i}, {j}, {op})"
        numbers = combine(numbers, i, j, op) or numbers
    return hints


class ReplayPlanAutoStopHint(ReplayPlanAutoStop):
    """Like replay-plan-autostop, and every observation along the plan names its next step."""

    name = "toy24.replay-plan-autostop-hint"

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        layers = super().instantiate(env, task, magnitude)
        layers[-1] = {"kind": "contract", "id": "auto-stop-hint", "code": HINT_CODE.replace("__HINTS__", repr(_hints(env)))}
        return layers


BLOCK_CODE = '''BLOCKED = {blocked!r}


def filter_action(action, state, memo):
    if action.tool == "combine" and action.args.get("op") in BLOCKED:
        return Block(reason="the operator " + action.args.get("op") + " is not allowed here; "
                     "allowed: " + ", ".join(op for op in {ops!r} if op not in BLOCKED))
    return None
'''


class BlockOperator:
    """Block 1..k operators that the solver's plan does not use (cheapest first)."""

    name = "toy24.block-operator"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[list[str]]:
        used = {a.args.get("op") for a in _plan(env) if a.tool == "combine"}
        free = [op for op in ("div", "sub", "add", "mul") if op not in used]
        return [free[: k + 1] for k in range(len(free))]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        blocked = sorted(magnitude)
        return [{"kind": "contract", "id": "block-" + "-".join(blocked),
                 "code": BLOCK_CODE.format(blocked=blocked, ops=list(OPS))}]


HIDE_CODE = '''HIDE = {n}


def filter_observation(observation, state, memo):
    numbers = list(state["numbers"])
    text = observation.text
    for k in range(min(HIDE, len(numbers))):
        text = text.replace("[" + str(k) + "] " + numbers[k], "[" + str(k) + "] ?", 1)
    data = dict(observation.data)
    if "numbers" in data:
        data["numbers"] = ["?" if k < HIDE else v for k, v in enumerate(numbers)]
    return Observation(text=text, data=data)
'''


class HideNumber:
    """Hide the first n numbers (shown as '?'); n from 1 to all but one."""

    name = "toy24.hide-number"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        count = len(env.get_env_state().get("numbers", []))
        return list(range(1, max(1, count)))

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "contract", "id": f"hide-{magnitude}", "code": HIDE_CODE.format(n=int(magnitude))}]
