"""ALFWorld's reference solution: the planner's walkthrough stored in the game file.

``alfworld-generate`` solves every game with the fast-downward planner and keeps the
plan as ``walkthrough`` in ``game.tw-pddl``. It is a reference from the reset state; after
actions that follow it (a stage replaying a prefix, say) the rest of it still is; after
any other action there is no reference from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envh import Action


def _norm(command: Any) -> str:
    return " ".join(str(command).strip().lower().split())


def walkthrough_from_here(env: Any) -> list[Action] | None:
    """The rest of the walkthrough from ``env``'s current state, or ``None``."""
    episode = getattr(env, "_episode", None)
    game_file = getattr(env, "_game_files", {}).get(getattr(env, "task", None))
    if episode is None or not game_file:
        return None
    try:
        plan = [_norm(c) for c in json.loads(Path(game_file).read_text()).get("walkthrough") or []]
    except (OSError, ValueError):
        return None
    done = [_norm(a.args.get("command", "")) for a in episode["actions"]]
    if not plan or plan[: len(done)] != done:
        return None
    return [Action(tool="do", args={"command": c}) for c in plan[len(done):]]
