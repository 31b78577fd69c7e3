"""The ``envh`` command line. Plugins add sub-commands through ``envh_register_commands``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from . import errors
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
@click.option("--config", "config_json", default="{}", help="Bridge config as JSON.")
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
    with make({"bridge": bridge, "config": config}) as env:
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


@cli.command("ui")
@click.argument("run_dirs", nargs=-1)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (keep it loopback).")
@click.option("--port", default=0, show_default=True, help="Port (0: a free one).")
def ui_cmd(run_dirs: tuple[str, ...], host: str, port: int) -> None:
    """A local web app: play and edit specs, browse runs and trajectories, rig reports.

    Prints the URL with a random access token; the runs in RUN_DIRS are opened read-only.
    """
    try:
        from .ui.app import serve
    except ImportError as exc:
        raise errors.EnvhError(f"envh ui needs the ui extra (pip install -e 'core[ui]'): {exc}") from exc
    serve(list(run_dirs), host=host, port=port)


@cli.group("workspace")
def workspace_group() -> None:
    """The workspace kind's Experience library."""


@workspace_group.command("consolidate")
@click.argument("library")
@click.option("--consolidator", default="rule", show_default=True, help="rule, or llm:MODEL (OpenAI-compatible).")
@click.option("--base-url", default=None, help="Endpoint of the llm consolidator.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
def workspace_consolidate(library: str, consolidator: str, base_url: str | None, api_key_env: str) -> None:
    """Fold the notes episodes wrote into LIBRARY (run it between rollouts, not during)."""
    from pathlib import Path

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


def main() -> None:
    from .rollout.cli import register as register_rollout

    register_rollout(cli)
    try:
        _registry().register_commands(cli)
    except errors.EnvhError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    cli(prog_name="envh")
