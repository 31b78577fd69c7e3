"""ALFWorld's reference solution from the current state.

``alfworld-generate`` solves every game with the fast-downward planner and keeps the
plan as ``walkthrough`` in ``game.tw-pddl``. From the reset state, and after actions that
follow it (a stage replaying a prefix, say), the rest of the walkthrough is the reference.
After any other action (a stage that goes elsewhere, the policy's own detour) the same
planner is asked again from the engine's current PDDL state (TextWorld's
``PddlState.replan``, what ALFWorld's ``planner`` expert does at every step): its plan,
in the game's command words, is the reference from here. ``None`` when the episode is
over, no game is loaded, or the planner finds no plan from here (a dead end: the planner
is complete on the game's PDDL); a planner that fails raises ``EnvError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envh import Action, errors


def _norm(command: Any) -> str:
    return " ".join(str(command).strip().lower().split())


def _walkthrough(env: Any, done: list[str]) -> list[str] | None:
    game_file = getattr(env, "_game_files", {}).get(getattr(env, "task", None))
    if not game_file:
        return None
    try:
        plan = [_norm(c) for c in json.loads(Path(game_file).read_text()).get("walkthrough") or []]
    except (OSError, ValueError):
        return None
    if not plan or plan[: len(done)] != done:
        return None
    return plan[len(done):]


def planner_from_here(engine: Any) -> list[str] | None:
    """The fast-downward planner's plan from the engine's current state, or ``None``."""
    from .engine import _keep_argv

    env = getattr(engine, "_env", None)
    pddl = env
    while getattr(pddl, "_wrapped_env", None) is not None:
        pddl = pddl._wrapped_env
    state = getattr(pddl, "_pddl_state", None)
    if state is None:
        return None
    try:
        with _keep_argv():
            plan = state.replan(pddl._entity_infos)
    except Exception as exc:  # named, not read as "no plan": a dead end and a crash differ
        raise errors.EnvError(f"ALFWorld's planner failed from this state: {exc!r}") from exc
    return [_norm(c) for c in plan] or None


def walkthrough_from_here(env: Any) -> list[Action] | None:
    """The reference from ``env``'s current state (the rest of the walkthrough when the
    episode followed it, else the planner's plan from here), or ``None``."""
    episode = getattr(env, "_episode", None)
    engine = getattr(env, "engine", None)
    if episode is None or engine is None or getattr(env, "truncated", False):
        return None
    if engine.won:
        return []  # won already: nothing left to do
    done = [_norm(a.args.get("command", "")) for a in episode["actions"]]
    plan = _walkthrough(env, done)
    if plan is None:
        plan = planner_from_here(engine)
    if not plan:
        return None
    return [Action(tool="do", args={"command": c}) for c in plan]
