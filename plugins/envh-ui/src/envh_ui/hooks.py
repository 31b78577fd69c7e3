"""envh hook implementations of the UI plugin: the ``envh ui`` command."""

from __future__ import annotations

import click
from envh import hookimpl


@click.command("ui")
@click.argument("run_dirs", nargs=-1)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (keep it loopback).")
@click.option("--port", default=0, show_default=True, help="Port (0: a free one).")
def ui_cmd(run_dirs: tuple[str, ...], host: str, port: int) -> None:
    """A local web app: play and edit specs, browse runs and trajectories, rig reports.

    Prints the URL with a random access token; the runs in RUN_DIRS are opened read-only.
    """
    from .app import serve

    serve(list(run_dirs), host=host, port=port)


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    cli.add_command(ui_cmd)
