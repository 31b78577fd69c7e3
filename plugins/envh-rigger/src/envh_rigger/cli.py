"""``envh rig`` and ``envh pool``: the designer loop and its harness pool on the command line.

With no flags, ``envh rig toy24`` runs the embedded default: the local SmolLM2 policy,
the template designer and an ``sr:0.4-0.6`` band on a few Toy24 tasks.
"""

from __future__ import annotations

import json

import click
from click.core import ParameterSource
from envh import errors
from envh.hostpaths import data_option

DEFAULT_POLICY = "local:smollm2"
_FIELD = {"policy_options": "policy_options", "designer_options": "designer_options"}


@click.command("rig")
@click.argument("spec", default="toy24")
@click.option("--tasks", default=None,
              help="';'-separated task ids (SPLIT/ID or ID), or 'split:NAME[:N]'. "
                   "Default for toy24: split:medium:2.")
@click.option("--policy", default=DEFAULT_POLICY, show_default=True, help="Policy NAME[:ARG].")
@click.option("--policy-option", "policy_options", multiple=True,
              help="KEY=VALUE (JSON value) for the policy; repeatable. A local model samples at "
                   "temperature 0.8 unless told otherwise (a band needs varied rollouts).")
@click.option("--designer-option", "designer_options", multiple=True,
              help="KEY=VALUE (JSON value) for the designer, e.g. base_url=... for llm.")
@click.option("--designer", default="template", show_default=True, help="template | llm:MODEL")
@click.option("--diagnoser", default="stats", show_default=True,
              help="stats | llm:MODEL (endpoint from OPENAI_BASE_URL), or any envh_diagnosers name.")
@click.option("--target", default="sr:0.4-0.6", show_default=True,
              help="sr:LO-HI | steps:LO-HI | beats-baseline:D | weakness:PREDICATE (stops-early, "
                   "repeats:N, calls:TOOL:REGEX, submits-before-test, invalid:N) | weakness:\"plain words\"")
@click.option("-k", "k", default=5, show_default=True, help="Rollouts per observation batch.")
@click.option("--k-max", type=int, default=None,
              help="Cap on the rollouts of one validation (default: the validator's design for the "
                   "band, 30 at width 0.2; a lower cap voids its stated error rates).")
@click.option("--rounds", default=5, show_default=True, help="Design rounds per task.")
@click.option("--out", "out", default="runs/rig", show_default=True, help="Output directory.")
@click.option("--resume", is_flag=True,
              help="Continue the run in --out without redoing work (crashed tasks run again). Options "
                   "given must equal the stored ones (budgets and --workers may change).")
@click.option("--coevolve", is_flag=True, help="Stack accepted candidates, re-observe, design on top if out of target.")
@click.option("--base-pool", default=None, help="Start each task from its accepted spec in this pool.")
@click.option("--max-rollouts", type=int, default=None, help="Budget: total rollouts.")
@click.option("--max-tokens", type=int, default=None, help="Budget: total LLM tokens.")
@click.option("--max-dollars", type=float, default=None, help="Budget: total cost (see --prices).")
@click.option("--max-seconds", type=float, default=None, help="Budget: wall-clock seconds.")
@click.option("--prices", default=None, help="JSON price table {model: [in_per_1M, out_per_1M]}.")
@click.option("--seed", default=0, show_default=True)
@click.option("--max-steps", type=int, default=None,
              help="Policy turns per episode, invalid ones included (default: 12 on toy24, else 30).")
@click.option("--workers", default=2, show_default=True,
              help="Worker processes playing a batch of rollouts at once (1: in this process).")
@data_option
def rig_cmd(spec: str, tasks: str | None, policy: str, policy_options: tuple[str, ...],
            designer_options: tuple[str, ...], designer: str, target: str, k: int,
            k_max: int | None, rounds: int, out: str, resume: bool, coevolve: bool, base_pool: str | None,
            max_rollouts: int | None, max_tokens: int | None, max_dollars: float | None,
            max_seconds: float | None, prices: str | None, seed: int, max_steps: int | None,
            workers: int, diagnoser: str) -> None:
    """Reshape SPEC (a spec file or a bridge name) until POLICY lands in TARGET."""
    from .budget import Budget
    from .run import RigConfig, rig

    popts = _options(policy_options)
    if policy.split(":")[0] == "local":
        popts.setdefault("temperature", 0.8)
    config = RigConfig(
        spec=spec, tasks=tasks, policy=policy, policy_options=popts,
        designer_options=_options(designer_options), designer=designer, target=target, k=k, k_max=k_max,
        rounds=rounds, out=out, resume=resume, coevolve=coevolve, base_pool=base_pool, seed=seed,
        workers=workers, max_steps=max_steps, diagnoser=diagnoser,
        budget=Budget(max_rollouts=max_rollouts, max_tokens=max_tokens, max_dollars=max_dollars,
                      max_seconds=max_seconds, prices=_prices(prices)))
    ctx = click.get_current_context()
    given = {name for name in ctx.params
             if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)}
    explicit = {_FIELD.get(name, name) for name in given}
    if explicit & {"max_rollouts", "max_tokens", "max_dollars", "max_seconds", "prices"}:
        explicit.add("budget")
    try:
        summary = rig(config, explicit=explicit, echo=click.echo)
    except errors.EnvhError as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(f"report: {summary['report']}")


def _prices(text: str | None) -> dict[str, object] | None:
    if not text:
        return None
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc}); e.g. '{{\"gpt-4o\": [2.5, 10]}}'",
                                 param_hint="--prices") from exc
    if not isinstance(table, dict) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v)
            for v in table.values()):
        raise click.BadParameter("expected {model: [in_per_1M, out_per_1M]}", param_hint="--prices")
    return table


def _options(pairs: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


@click.command("pool")
@click.argument("directory")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--rejected", is_flag=True, help="List the archived rejected candidates instead.")
def pool_cmd(directory: str, as_json: bool, rejected: bool) -> None:
    """List the accepted harnesses in a rig run's pool (DIR or DIR/pool)."""
    from .pool import HarnessPool

    pool = HarnessPool.open(directory)
    entries = pool.rejected() if rejected else pool.entries()
    if as_json:
        click.echo(json.dumps(entries, indent=2))
        return
    if not entries:
        click.echo("(empty)")
    for e in entries:
        stats = e.get("stats", {}).get("validation", {})
        sr = stats.get("success_rate")
        line = f"{e['spec_id'][:12]}  {e['task']:<24} sr={sr if sr is None else f'{sr:.2f}'}"
        click.echo(line + (f"  rejected: {e.get('reason')}" if rejected else f"  {e.get('spec_path', '')}"))
