"""envh hook implementations for ALFWorld: the bridge and the ``envh alfworld`` commands.

Only ``@hookimpl`` functions returning records; heavy modules load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envh import BridgeInfo, hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [BridgeInfo(
        name="alfworld", factory="envh_alfworld.bridge:AlfworldEnv",
        description="ALFWorld household text games on the TextWorld engine (tool: do(command))")]


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    from envh_alfworld.cli import alfworld

    cli.add_command(alfworld)
