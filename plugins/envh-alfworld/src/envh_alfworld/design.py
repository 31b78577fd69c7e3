"""ALFWorld templates for the template designer (``envh_templates``), over ``templates``.

Each object follows the designer's template protocol: ``name``, ``direction``
(``"scaffold"`` or ``"pressure"``), ``magnitudes(env, task)`` (settings that keep the task
solvable, weakest first) and ``instantiate(env, task, magnitude)`` (layer spec dicts).
``env`` is the current stack, already reset to ``task``; stages are computed from its
state, so they apply on top of whatever earlier layers did.
"""

from __future__ import annotations

from typing import Any

from envh_alfworld import templates


class HideTarget:
    """Pressure: hide the goal object in a closed receptacle; later-listed ones take a
    sweeping search longer, so they come last. Fridges and microwaves only when nothing
    else can be closed (the agent visits them anyway for cooling and heating); never the
    goal's target receptacles (the replay could finish the task)."""

    name = "alfworld.hide-target"
    direction = "pressure"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        options = templates.hiding_places(env.get_env_state())
        plain = [r for r in options if not r.startswith(("fridge ", "microwave "))]
        return plain or options

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        return [templates.hide_target_in_closed_receptacle(env.get_env_state(), receptacle=magnitude)]


class TruncateRoom:
    """Pressure: cut the room description; 2 sentences hide the receptacle list."""

    name = "alfworld.truncate-room"
    direction = "pressure"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        return [2, 1]

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        return [templates.truncate_room_description(int(magnitude))]


class BlockTeleport:
    """Pressure: no ``go to`` an unvisited receptacle out of the room's listing order."""

    name = "alfworld.block-teleport"
    direction = "pressure"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        return [1]

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        return [templates.block_unvisited_goto()]


class PrecompleteSubgoal:
    """Scaffold: do one sub-goal for the agent (take the object; then also clean/heat/cool
    it, or place the first of two)."""

    name = "alfworld.precomplete-subgoal"
    direction = "scaffold"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        state = env.get_env_state()
        if state.get("holding"):
            return []
        stronger = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
                    "pick_cool_then_place_in_recep": "cool", "pick_two_obj_and_place": "place_one"}
        return ["take", *([stronger[state["task_type"]]] if state["task_type"] in stronger else [])]

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        return [templates.precomplete_subgoal(env.get_env_state(), subgoal=str(magnitude))]


class RevealTarget:
    """Scaffold: every observation ends with where the goal object lies (ground truth)."""

    name = "alfworld.reveal-target"
    direction = "scaffold"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        return [1]

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        return [templates.reveal_target(templates.target_object(env.get_env_state()))]
