"""envh hook implementations for ALFWorld: the bridge and the ``envh alfworld`` commands.

Only ``@hookimpl`` functions returning records; heavy modules load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envh import BridgeInfo, TemplateInfo, hookimpl

# ALFWorld's own weakness predicates (a cheap module: records and pure functions)
from envh_alfworld.weakness import envh_weakness_predicates  # noqa: F401  (re-exported hook)

if TYPE_CHECKING:
    import click


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [BridgeInfo(
        name="alfworld", factory="envh_alfworld.bridge:AlfworldEnv",
        data_paths=("{data_path}", "ALFWORLD_DATA=~/.cache/alfworld"),
        description="ALFWorld household text games on the TextWorld engine (tool: do(command))")]


@hookimpl
def envh_templates() -> list[TemplateInfo]:
    d = "envh_alfworld.design"
    return [
        TemplateInfo(name="alfworld.hide-target", factory=f"{d}:HideTarget", bridge="alfworld",
                     description="pressure: hide the goal object in a closed receptacle (stage)"),
        TemplateInfo(name="alfworld.truncate-room", factory=f"{d}:TruncateRoom", bridge="alfworld",
                     description="pressure: cut the room description to its first sentences (contract)"),
        TemplateInfo(name="alfworld.block-teleport", factory=f"{d}:BlockTeleport", bridge="alfworld",
                     description="pressure: no go-to unvisited receptacles out of order (contract)"),
        TemplateInfo(name="alfworld.precomplete-subgoal", factory=f"{d}:PrecompleteSubgoal", bridge="alfworld",
                     description="scaffold: take/clean/heat/cool/place for the agent (stage)"),
        TemplateInfo(name="alfworld.reveal-target", factory=f"{d}:RevealTarget", bridge="alfworld",
                     description="scaffold: say where the goal object lies (contract)"),
    ]


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    from envh_alfworld.cli import alfworld

    cli.add_command(alfworld)
