"""envh hook implementations: the ``envh experiment`` command (loaded lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envh import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    from envh_experiment.cli import experiment

    cli.add_command(experiment)
