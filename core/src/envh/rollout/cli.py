"""Rollout commands for the ``envh`` CLI (run, show, export)."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Attach the rollout commands to the root group."""
