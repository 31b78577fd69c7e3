"""A generic template with a continuous knob, for any bridge with a reference solution.

``guide`` (scaffold): a contract that follows the bridge's reference solution from the
start state; when the policy's action is off the reference, a fraction ``m`` of those
actions is replaced by the reference's next step. At ``m = 0`` nothing changes; at
``m = 1`` every off-reference action is answered by the reference, so the task is solved
whatever the policy does. In between the success rate moves with ``m``, so the designer
searches it on the measured response (secant between measured points, kept inside the
bisection interval) instead of stepping a list index.

With a ``focus`` the replacements concentrate where the weakness is: only off-reference
actions that match it (a tool, a pattern over the JSON arguments, an action the episode
already took) count toward ``m``; the others pass untouched. The designer takes the focus
from the weakness predicate that bites most in the failed episodes (``focus_for``).
"""

from __future__ import annotations

import json
from typing import Any

from envh import ActionableEnv, TaskRef

GUIDE_CODE = '''import json
import re

PLAN = json.loads(__PLAN__)
RATE = __RATE__
FOCUS = json.loads(__FOCUS__)


def _in_focus(action, memo):
    if not FOCUS:
        return True
    tools = FOCUS.get("tools")
    if tools and action.tool not in tools:
        return False
    pattern = FOCUS.get("pattern")
    if pattern and not re.search(pattern, json.dumps(dict(action.args), sort_keys=True)):
        return False
    if FOCUS.get("repeats"):
        seen = memo.get("seen", [])
        return action.tool + json.dumps(dict(action.args), sort_keys=True) in seen
    return True


def filter_action(action, state, memo):
    call = action.tool + json.dumps(dict(action.args), sort_keys=True)
    focused = _in_focus(action, memo)
    memo["seen"] = memo.get("seen", []) + [call]
    k = memo.get("k", 0)
    if k >= len(PLAN):
        return None
    step = PLAN[k]
    if action.tool == step["tool"] and dict(action.args) == step["args"]:
        memo["k"] = k + 1
        return None
    if not focused:
        return None
    acc = memo.get("acc", 0.0) + RATE
    if acc >= 1.0 - 1e-9:
        memo["acc"] = acc - 1.0
        memo["k"] = k + 1
        return Action(tool=step["tool"], args=step["args"])
    memo["acc"] = acc
    return None
'''

SUBMIT_TOOLS = ("submit", "stop", "finish", "answer")


def _reference(env: ActionableEnv) -> list[dict[str, Any]]:
    ref = getattr(env.unwrapped, "reference_actions", None)
    try:
        plan = ref() if callable(ref) else None
    except Exception:  # noqa: BLE001 - no reference, no guidance
        plan = None
    return [{"tool": a.tool, "args": dict(a.args)} for a in plan or []]


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
    """Replace a fraction ``m`` of (focused) off-reference actions by the reference's next step."""

    name = "guide"
    direction = "scaffold"
    axis = "A"
    continuous = True

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[float]:
        return [0.25, 0.5, 0.75, 1.0] if _reference(env) else []

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any,
                    focus: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        plan = _reference(env)
        rate = min(1.0, max(0.0, float(magnitude)))
        code = (GUIDE_CODE.replace("__PLAN__", repr(json.dumps(plan))).replace("__RATE__", repr(rate))
                .replace("__FOCUS__", repr(json.dumps(focus or {}, sort_keys=True))))
        return [{"kind": "contract", "id": f"guide-{rate:.3f}" + ("-focus" if focus else ""), "code": code}]
