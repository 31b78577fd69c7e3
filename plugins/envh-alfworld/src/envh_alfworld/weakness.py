"""ALFWorld's own weakness predicates, contributed through ``envh_weakness_predicates``.

* ``alfworld.revisits[:N]``: the agent goes to a location it has already been to, with
  nothing taken or placed since its last visit there, at least N times (default 1): it
  searches in circles instead of moving on.

A predicate is ``fn(trajectory, *args) -> bool`` over a recorded trajectory; the hook
below is the only import-time code, so loading it stays cheap.
"""

from __future__ import annotations

from typing import Any

from envh import WeaknessInfo, hookimpl

_CHANGES = ("take ", "put ", "move ", "open ", "close ", "clean ", "heat ", "cool ", "slice ", "use ")


def _command(step: Any) -> str:
    action = step.executed or step.proposed
    if action is None or action.tool != "do":
        return ""
    return " ".join(str(action.args.get("command", "")).strip().lower().split())


def revisits(t: Any, n: str = "1") -> bool:
    """alfworld.revisits[:N]: goes back to a location with nothing done since it was there, N times."""
    if not str(n).isdigit() or int(n) < 1:
        raise ValueError(f"a count is a whole number >= 1, got {n!r}")
    since: dict[str, int] = {}  # location -> number of world changes when last visited
    changes = found = 0
    for step in t.steps:
        cmd = _command(step)
        if step.error:
            continue
        if cmd.startswith("go to "):
            place = cmd[len("go to "):]
            if place in since and since[place] == changes:
                found += 1
            since[place] = changes
        elif cmd.startswith(_CHANGES):
            changes += 1
    return found >= int(n)


@hookimpl
def envh_weakness_predicates() -> list[WeaknessInfo]:
    return [WeaknessInfo(
        name="alfworld.revisits", factory="envh_alfworld.weakness:revisits", bridge="alfworld",
        focus={"tools": ["do"], "pattern": "go to"}, keywords=("revisit",),
        description="alfworld.revisits[:N]: goes back to a location with nothing done since, N times")]
