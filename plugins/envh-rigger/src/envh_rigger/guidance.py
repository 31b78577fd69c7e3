"""A generic template with a continuous knob, for any bridge with a reference solution.

``guide`` (scaffold): a contract that follows the bridge's reference solution from the
start state; when the policy's action is off the reference, a fraction ``m`` of those
actions (spread evenly over the episode) is replaced by the reference's next step. At
``m = 0`` nothing changes; at ``m = 1`` every off-reference action is answered by the
reference, so the task is solved whatever the policy does. In between the success rate
moves with ``m``, so the designer can search it on the measured response (secant between
measured points, kept inside the bisection interval) instead of stepping a list index.
"""

from __future__ import annotations

import json
from typing import Any

from envh import ActionableEnv, TaskRef

GUIDE_CODE = '''import json

PLAN = json.loads(__PLAN__)
RATE = __RATE__


def filter_action(action, state, memo):
    k = memo.get("k", 0)
    if k >= len(PLAN):
        return None
    step = PLAN[k]
    if action.tool == step["tool"] and dict(action.args) == step["args"]:
        memo["k"] = k + 1
        return None
    acc = memo.get("acc", 0.0) + RATE
    if acc >= 1.0 - 1e-9:
        memo["acc"] = acc - 1.0
        memo["k"] = k + 1
        return Action(tool=step["tool"], args=step["args"])
    memo["acc"] = acc
    return None
'''


def _reference(env: ActionableEnv) -> list[dict[str, Any]]:
    ref = getattr(env.unwrapped, "reference_actions", None)
    try:
        plan = ref() if callable(ref) else None
    except Exception:  # noqa: BLE001 - no reference, no guidance
        plan = None
    return [{"tool": a.tool, "args": dict(a.args)} for a in plan or []]


class Guide:
    """Replace a fraction ``m`` of off-reference actions by the reference's next step."""

    name = "guide"
    direction = "scaffold"
    axis = "A"
    continuous = True

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[float]:
        return [0.25, 0.5, 0.75, 1.0] if _reference(env) else []

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        plan = _reference(env)
        rate = min(1.0, max(0.0, float(magnitude)))
        code = GUIDE_CODE.replace("__PLAN__", repr(json.dumps(plan))).replace("__RATE__", repr(rate))
        return [{"kind": "contract", "id": f"guide-{rate:.3f}", "code": code}]
