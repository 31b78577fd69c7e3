"""``envh play``: a person plays an env spec in the terminal.

Actions are typed as ``tool key=value ...`` (values parsed as JSON when they can be,
else taken as strings) or as JSON ``{"tool": ..., "args": {...}}``.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from .types import Action, TaskRef, ToolSpec


def parse_action(line: str) -> Action:
    """``combine i=0 j=1 op=add`` or ``{"tool": "combine", "args": {...}}`` → Action."""
    line = line.strip()
    if line.startswith("{"):
        data = json.loads(line)
        if not isinstance(data, dict) or "tool" not in data:
            raise ValueError('JSON actions look like {"tool": "name", "args": {...}}')
        return Action(tool=str(data["tool"]), args=dict(data.get("args") or {}))
    parts = shlex.split(line)
    if not parts:
        raise ValueError("empty action")
    args: dict[str, Any] = {}
    for part in parts[1:]:
        key, sep, raw = part.partition("=")
        if not sep:
            raise ValueError(f"argument {part!r} is not key=value")
        try:
            args[key] = json.loads(raw)
        except json.JSONDecodeError:
            args[key] = raw
    return Action(tool=parts[0], args=args)


def describe_tools(tools: list[ToolSpec]) -> str:
    lines = []
    for t in tools:
        props = t.parameters.get("properties", {})
        sig = " ".join(f"{k}=<{v.get('type', 'any')}{'|' + '|'.join(map(str, v['enum'])) if 'enum' in v else ''}>"
                       for k, v in props.items())
        lines.append(f"  {t.name} {sig}".rstrip() + f"    # {t.description}")
    return "\n".join(lines)


def resolve_task(env: Any, task_id: str | None) -> TaskRef | None:
    """``SPLIT/ID`` or a bare ``ID`` looked up in ``list_tasks()``."""
    if task_id is None:
        return None
    tasks = env.list_tasks()
    for t in tasks:
        if task_id in (t.instance_id, f"{t.split}/{t.instance_id}"):
            return t  # type: ignore[no-any-return]
    split, _, ident = task_id.rpartition("/")
    suite = tasks[0].suite if tasks else "default"
    return TaskRef(suite=suite, split=split or "default", instance_id=ident)


def play(spec: str, task_id: str | None, seed: int, trust: str | None = None) -> None:
    from .spec import make

    with make(spec, trust=trust) as env:
        task = resolve_task(env, task_id)
        result = env.reset(task=task, seed=seed)
        click.echo(result.observation.text)
        click.echo("\nTools:\n" + describe_tools(env.tools()))
        click.echo("Type an action (`tool key=value ...` or JSON), `?` for tools, `quit` to stop.")
        steps = 0
        while True:
            try:
                line = click.prompt(">", prompt_suffix=" ")
            except (click.Abort, EOFError):
                break
            if line.strip() in ("quit", "exit"):
                break
            if line.strip() == "?":
                click.echo(describe_tools(env.tools()))
                continue
            try:
                action = parse_action(line)
            except ValueError as exc:
                click.secho(f"Could not read that action: {exc}", fg="yellow")
                continue
            resp = env.step(action)
            steps += 1
            click.echo(resp.observation.text)
            for effect in resp.info.get("envh", []):
                if effect.get("action") == "blocked" or effect.get("transition") or effect.get("action") == "rewritten":
                    click.secho(f"  [{effect['layer']}] {effect}", fg="cyan")
            if resp.terminated or resp.truncated:
                click.echo("Episode over" + (" (truncated)." if resp.truncated else "."))
                break
        verdict = env.evaluate()
        click.secho(f"Verdict: {'SUCCESS' if verdict.success else 'FAIL'} (score {verdict.score}, "
                    f"{steps} steps)", fg="green" if verdict.success else "red", bold=True)
