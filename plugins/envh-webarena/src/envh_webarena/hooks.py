"""envh hook implementations: the ``webarena``, ``webshop`` and ``miniwob`` bridges, web
templates and the ``envh webarena`` commands.

Only ``@hookimpl`` functions returning records; Playwright and the bridges load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envh import BridgeInfo, TemplateInfo, hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [
        BridgeInfo(name="webarena", factory="envh_webarena.webarena.bridge:WebArenaEnv",
                   data_paths=("{config_files}", "rw:{auth_dir}", "rw:WA_AUTH_DIR="), host_access=("network",),
                   description="WebArena tasks (config files, WA_* sites) graded by WebArena's evaluators, in Chromium"),
        BridgeInfo(name="webshop", factory="envh_webarena.webshop.bridge:make_webshop",
                   data_paths=("{data}", "WEBSHOP_DATA="),
                   description="WebShop: a WebShop-compatible shop over WebShop's data files (modes text and browser)"),
        BridgeInfo(name="miniwob", factory="envh_webarena.miniwob:MiniwobEnv",
                   description="MiniWoB++ tasks from the miniwob wheel in Chromium, reward from the task's JS"),
    ]


@hookimpl
def envh_templates() -> list[TemplateInfo]:
    d = "envh_webarena.design"
    return [
        TemplateInfo(name="web.same-host", factory=f"{d}:SameHost", bridge="webarena",
                     description="pressure: goto may not leave the start page's host (contract)"),
        TemplateInfo(name="web.short-tree", factory=f"{d}:ShortTree", bridge="webarena",
                     description="pressure: show only the first lines of the accessibility tree (contract)"),
    ]


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    from envh_webarena.cli import webarena

    cli.add_command(webarena)
