"""The ``envh`` command line. Plugins add sub-commands through ``envh_register_commands``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from . import errors
from .hostpaths import data_option
from .spec import TRUST_CODE_HELP


def _registry() -> Any:
    from .plugins import get_registry

    return get_registry()


class EnvhGroup(click.Group):
    """Turns envh errors into one clear line and exit code 2, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.EnvhError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(2)


@click.group(cls=EnvhGroup)
@click.version_option(package_name="envh")
def cli() -> None:
    """envh: programmable training worlds from static agent benchmarks."""


_CONTRIBUTIONS = (("bridges", "envh_bridges"), ("component_kinds", "envh_component_kinds"),
                  ("policies", "envh_policies"), ("executors", "envh_executors"),
                  ("designers", "envh_designers"), ("diagnosers", "envh_diagnosers"),
                  ("trainers", "envh_trainers"), ("templates", "envh_templates"))


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_cmd(as_json: bool) -> None:
    """List installed plugins, what each contributes, and any that failed to load.

    Exits 1 when a plugin failed to load or one of its hooks failed, so scripts and CI
    can use it as a health check.
    """
    from rich.console import Console
    from rich.table import Table

    reg = _registry()
    contributions: dict[str, list[dict[str, str]]] = {}
    for key, hook in _CONTRIBUTIONS:
        contributions[key] = [
            {"name": name, "plugin": info.name, "distribution": info.distribution, "version": info.version}
            for name, info in sorted(reg.providers(hook).items())]
    report: dict[str, Any] = {
        "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version} for p in reg.loaded],
        **{key: [c["name"] for c in items] for key, items in contributions.items()},
        "providers": contributions,
        "failures": [str(f) for f in reg.failures],
    }
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        console = Console()
        table = Table(title="envh plugins")
        for col in ("plugin", "distribution", "version"):
            table.add_column(col)
        for p in report["plugins"]:
            table.add_row(p["name"], p["distribution"], p["version"])
        console.print(table)
        provided = Table(title="contributions")
        for col in ("kind", "name", "provided by"):
            provided.add_column(col)
        for key, items in contributions.items():
            for c in items:
                provided.add_row(key.replace("_", " "), c["name"], f"{c['distribution']} {c['version']}".strip())
        console.print(provided)
        for failure in report["failures"]:
            console.print(f"[red]{failure}[/red]", highlight=False)
    if report["failures"]:
        sys.exit(1)


@cli.command("tasks")
@click.argument("bridge")
@click.option("--split", default=None, help="Only this split.")
@click.option("--config", "config_json", default="{}",
              help="Bridge config as JSON, taken as yours: the paths it names are read without a --data grant.")
@click.option("--group", default=None, help="Only tasks of this group (a task type, a repository).")
def tasks_cmd(bridge: str, split: str | None, config_json: str, group: str | None) -> None:
    """List the tasks a bridge offers: split, instance id and, where the bridge gives one,
    the task's group."""
    from .spec import make

    try:
        config = json.loads(config_json)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--config") from exc
    if not isinstance(config, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--config")
    # the caller typed this config: the paths it names are the caller's (and a bare bridge carries no code)
    with make({"bridge": bridge, "config": config}, trust="trusted") as env:
        tasks = env.list_tasks(split)
    chosen = [t for t in tasks if group is None or t.group == group]
    if group is not None and not chosen:
        groups = sorted({t.group for t in tasks if t.group is not None})
        raise click.BadParameter(f"no task is in group {group!r}. Groups: {', '.join(groups) or '(none)'}",
                                 param_hint="--group")
    for task in chosen:
        click.echo(f"{task.split}\t{task.instance_id}" + ("" if task.group is None else f"\t{task.group}"))


@cli.command("play")
@click.argument("spec")
@click.option("--task", "task_id", default=None, help="Instance id (SPLIT/ID or ID).")
@click.option("--seed", default=0, show_default=True)
@click.option("--trust-code", is_flag=True, help=TRUST_CODE_HELP)
@data_option
def play_cmd(spec: str, task_id: str | None, seed: int, trust_code: bool) -> None:
    """Play SPEC yourself: actions as `tool key=value ...` or JSON."""
    from .play import play

    play(spec, task_id, seed, trust="trusted" if trust_code else None)


@cli.group("spec")
def spec_group() -> None:
    """Check env specs and compute their ids."""


@spec_group.command("check")
@click.argument("path")
@click.option("--task", "task_id", default=None, help="Reset to this task (default: the bridge's default).")
@click.option("--no-reset", is_flag=True, help="Only build the stack; do not reset it.")
@data_option
def spec_check(path: str, task_id: str | None, no_reset: bool) -> None:
    """Validate a spec file, build its stack and reset it once (stages replay)."""
    from .play import resolve_task
    from .spec import make, parse_spec, spec_id

    parsed = parse_spec(path)
    # a spec file may come from anywhere: its code runs in the jail; the path lets errors name the file line
    with make(path, trust="untrusted") as env:
        if not no_reset:
            env.reset(task=resolve_task(env, task_id), seed=0)
    click.echo(f"ok: {len(parsed.layers)} layer(s) on bridge {parsed.bridge!r}; id {spec_id(parsed)}")


@spec_group.command("id")
@click.argument("path")
def spec_id_cmd(path: str) -> None:
    """Print the spec's content hash."""
    from .spec import spec_id

    click.echo(spec_id(path))


def main() -> None:
    from .rollout.cli import register as register_rollout

    register_rollout(cli)
    try:
        _registry().register_commands(cli)
    except errors.EnvhError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    cli(prog_name="envh")
