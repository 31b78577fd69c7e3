"""``envh workspace``: the workspace kind's Experience library from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from envh import errors


@click.group("workspace")
def workspace_group() -> None:
    """The workspace kind's Experience library."""


@workspace_group.command("consolidate")
@click.argument("library")
@click.option("--consolidator", default="rule", show_default=True, help="rule, or llm:MODEL (OpenAI-compatible).")
@click.option("--base-url", default=None, help="Endpoint of the llm consolidator.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
def workspace_consolidate(library: str, consolidator: str, base_url: str | None, api_key_env: str) -> None:
    """Fold the notes episodes wrote into LIBRARY (run it between rollouts, not during)."""
    from .experience import LLMConsolidator, consolidate, rule_consolidator

    if not Path(library).is_dir():
        raise errors.EnvhError(f"Experience library {library!r} does not exist (a workspace layer's `library:`).")
    if consolidator == "rule":
        chosen: Any = rule_consolidator
    elif consolidator.startswith("llm:") and len(consolidator) > 4:
        chosen = LLMConsolidator(consolidator[4:], base_url=base_url, api_key_env=api_key_env)
    else:
        raise errors.UnknownNameError("consolidator", consolidator, ["rule", "llm:MODEL"])
    decisions = consolidate(library, chosen)
    for d in decisions:
        click.echo(f"{d['op']:7} {d.get('category', '-'):10} {str(d.get('note'))[:70]}  ({d.get('reason', '')})")
    click.echo(f"{len(decisions)} note(s) consolidated")
