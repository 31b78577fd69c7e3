"""Rollout commands for the ``envh`` CLI: ``run`` (play episodes into a run directory,
resumable), ``show`` (summarise a run) and ``export`` (Parquet or chat-messages JSONL)."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import click

from .. import errors
from ..hostpaths import data_option
from ..spec import TRUST_CODE_HELP

# environment variables that choose what a policy talks to or loads, when no option does
# (the OpenAI SDK's endpoint, the embedded model's file): part of a run's configuration
POLICY_ENV: dict[str, tuple[str, ...]] = {"openai": ("OPENAI_BASE_URL",), "local": ("ENVH_SMOLLM2_GGUF",)}


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr)


def _summary_table(title: str, summary: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    table.add_row("episodes", str(summary["episodes"]))
    table.add_row("success rate [Wilson 95%]", f"{summary['success_rate']:.3f} "
                  f"[{summary['wilson_low']:.3f}, {summary['wilson_high']:.3f}]")
    table.add_row("mean steps", f"{summary['mean_steps']:.2f}")
    table.add_row("invalid steps", str(summary["invalid_steps"]))
    for error_class, n in summary["errors"].items():
        table.add_row(f"errors: {error_class}", str(n))
    return table


def _options(pairs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="--policy-option")
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out


def _policy_file_digest(policy: str) -> str | None:
    """SHA-256 of the script ``scripted:FILE`` plays (other policies' ARG need not be
    content: a model name, or a file whose presence is the state)."""
    import hashlib

    name, _, arg = policy.partition(":")
    if name != "scripted":
        return None
    try:
        return hashlib.sha256(Path(arg).read_bytes()).hexdigest() if arg and Path(arg).is_file() else None
    except OSError:
        return None


@click.command("run")
@click.argument("spec")
@click.option("--task", "task_ids", multiple=True, help="Task instance id (ID or SPLIT/ID); repeatable.")
@click.option("--tasks", "n_tasks", type=int, default=None, help="The first N tasks (of --split if given).")
@click.option("--split", default=None, help="Tasks of this split.")
@click.option("--policy", required=True, help="Policy spec: NAME or NAME:ARG (scripted:FILE, openai:MODEL, ...).")
@click.option("--policy-option", "policy_options", multiple=True,
              help="KEY=VALUE for the policy; VALUE is JSON, or else taken as a string.")
@click.option("-k", "k", type=click.IntRange(min=1), default=1, show_default=True, help="Rollouts per task.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of rollout 0 (rollout r: seed + r).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Concurrent episodes (default: CPU count, max 8).")
@click.option("--executor", default=None, help="pool (default), ray, inline or a plugin's; human plays inline.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Run directory.")
@click.option("--resume", is_flag=True, help="Finish the run in --out: play only the missing episodes.")
@click.option("--retry", "retry", type=click.Choice(["failed"]), default=None,
              help="With --resume: also re-play episodes that failed on the endpoint or the infrastructure.")
@click.option("--max-steps", type=click.IntRange(min=1), default=100, show_default=True, help="Steps per episode.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="Seconds per episode.")
@click.option("--retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="Retries of episodes lost with a worker.")
@click.option("--max-endpoint-failures", type=click.IntRange(min=0), default=5, show_default=True,
              help="Stop the run after this many consecutive endpoint failures (0: never).")
@click.option("--memory-mb", type=click.IntRange(min=0), default=None,
              help="Private writable memory cap (RLIMIT_DATA) of a worker and of each process it starts, each "
                   "on its own, not in sum (pool and ray default 16384; 0: none).")
@click.option("--cpu-s", type=click.FloatRange(min=0, min_open=True), default=None, help="CPU seconds per episode.")
@click.option("--isolation", type=click.Choice(["auto", "none", "namespace", "user"]), default=None,
              help="How pool workers are fenced off (default: user when root — own namespaces, uid nobody).")
@click.option("--pass-env", multiple=True, help="Secret variable the workers may see besides the policy's "
              "api_key_env (e.g. HF_TOKEN).")
@click.option("--plugin", "plugins", multiple=True, help="Extra plugin module for the workers to register.")
@click.option("--training", is_flag=True, help="A training run: the spec may adapt its tasks (training-only kinds: curriculum).")
@click.option("--trust-code", is_flag=True, help=TRUST_CODE_HELP)
@data_option
def run_cmd(spec: str, task_ids: tuple[str, ...], n_tasks: int | None, split: str | None, policy: str,
            policy_options: tuple[str, ...], k: int, seed: int, workers: int | None, executor: str | None, out: str,
            resume: bool, retry: str | None, max_steps: int, timeout_s: float, retries: int,
            max_endpoint_failures: int, memory_mb: int | None, cpu_s: float | None, isolation: str | None,
            pass_env: tuple[str, ...], plugins: tuple[str, ...], training: bool = False,
            trust_code: bool = False) -> None:
    """Play episodes of SPEC with a policy into the run directory --out.

    Everything is checked before anything is written: names (spec, tasks, policy,
    executor), options, and that the policy can be built where it will run. The command
    fails (non-zero exit) when every episode failed, or after --max-endpoint-failures
    consecutive endpoint failures; --resume --retry failed then finishes the run.
    """
    from ..plugins import get_registry
    from ..spec import parse_spec, spec_to_data
    from . import plan as planning
    from .store import TrajectoryStore, run_dir_exists
    from .warm import package_versions, parse_policy_spec

    reg = get_registry()
    for module in plugins:  # the parent needs them too (inline executor, spec parsing)
        if not reg.pm.has_plugin(module):
            try:
                reg.register(importlib.import_module(module), name=module)
            except Exception as exc:  # an ImportError, or whatever the module raised at import
                raise errors.EnvhError(f"Cannot load plugin module {module!r}: {type(exc).__name__}: {exc}") from exc
    if retry and not resume:
        raise click.BadParameter("--retry needs --resume (it re-plays episodes of an existing run)",
                                 param_hint="--retry")
    # -- every name and option, before anything is written -----------------------------
    policy_name = parse_policy_spec(policy)[0]
    reg.policy(policy_name)
    if policy_name == "human":
        if executor not in (None, "inline"):
            raise click.BadParameter(f"the human policy reads the terminal, so it plays inline, not in "
                                     f"{executor!r}: drop --executor or pass --executor inline",
                                     param_hint="--executor")
        executor = "inline"
    executor = executor or "pool"
    reg.executor(executor)
    options = planning.check_options(_options(policy_options))
    parsed = parse_spec(spec, reg)
    spec_data = spec_to_data(parsed, reg)
    if not training:  # an evaluation's task set stays fixed
        planning.refuse_evaluation(spec_data, reg)
    trust = "trusted" if trust_code else "untrusted"
    tasks = planning.select_tasks(spec_data, reg, task_ids=task_ids, n_tasks=n_tasks, split=split, trust=trust)
    requests = planning.build_plan(parsed, policy=policy, k=k, tasks=tasks, seed=seed, max_steps=max_steps,
                                   timeout_s=timeout_s, policy_options=options, registry=reg, training=training,
                                   trust=trust)
    if isolation is None:
        from .executors import isolation as fence

        isolation = "user" if fence.resolve("auto") != "none" else "auto"
    config = {"spec": spec_data, "spec_id": requests[0].spec_id if requests else None, "policy": policy,
              "policy_options": options, "k": k, "seed": seed, "max_steps": max_steps, "timeout_s": timeout_s,
              "executor": executor, "workers": workers, "retries": retries, "memory_mb": memory_mb,
              "cpu_s": cpu_s, "isolation": isolation, "plugins": sorted(plugins),
              "tasks": [None if t is None else str(t) for t in tasks], "keys": sorted(r.key for r in requests)}
    if trust_code:  # recorded only when set, so runs from before the flag resume as they were
        config["trust_code"] = True
    chosen = {name: os.environ[name] for name in POLICY_ENV.get(policy_name, ()) if os.environ.get(name)}
    if chosen:  # another endpoint or model file behind the same policy name is another run
        config["policy_env"] = chosen
    policy_file = _policy_file_digest(policy)
    if policy_file:  # scripted:FILE edited in place is another policy under the same name
        config["policy_file_sha256"] = policy_file
    versions = package_versions(reg)
    if run_dir_exists(out):
        with TrajectoryStore(Path(out) / "trajectories.sqlite") as store:
            planning.check_resumable(store, config, resume=resume, versions=versions)
    elif resume:
        raise errors.EnvhError(f"{out} holds no run to resume: run without --resume to start one.")
    exec_options: dict[str, Any] = {"timeout_s": timeout_s, "retries": retries, "cpu_s": cpu_s,
                                    "pass_env": list(pass_env), "plugins": list(plugins)}
    if executor in ("pool", "ray"):
        exec_options["isolation"] = isolation
    if memory_mb is not None:
        exec_options["memory_mb"] = memory_mb
    runner = planning.build_executor(reg, executor, workers, exec_options)
    try:
        check = getattr(runner, "check", None)
        if check is not None:  # the policy is built where it will run, before the first episode
            import inspect

            where = {"spec": requests[0].spec, "spec_id": requests[0].spec_id} \
                if requests and "spec" in inspect.signature(check).parameters else {}
            if where and "trust" in inspect.signature(check).parameters:
                where["trust"] = trust
            if where and "data" in inspect.signature(check).parameters:
                where["data"] = requests[0].data
            try:
                check(policy, options, **where)
            except (errors.PolicyError, errors.EnvError) as exc:
                hint = ("\n(workers run as nobody with --isolation user: make the file world-readable, or pass "
                        "--isolation namespace)") if "Permission denied" in str(exc) and isolation == "user" else ""
                raise type(exc)(f"{exc}{hint}") from exc
        if executor == "inline" and policy_name != "human":
            _console(True).print(
                "note: --executor inline plays every episode in this process, with its environment, privileges "
                "and memory: no isolation, no secret scrubbing, no limits but the time limit. Untrusted "
                "policies and bridges belong in the pool executor.", markup=False, highlight=False, soft_wrap=True)
        # -- now the run directory ---------------------------------------------------------
        threads_before = set(threading.enumerate())
        Path(out).mkdir(parents=True, exist_ok=True)
        lock = planning.lock_run_dir(out)  # held until this process ends
        if hasattr(runner, "open_log"):
            runner.open_log(str(Path(out) / "workers.log"))
        with planning.open_store(out) as store:
            if not resume:  # another command may have started a run here since the check above
                planning.check_resumable(store, config, resume=False, versions=versions)
            run_id, todo, retried = planning.start_or_resume(store, config, requests, resume=resume, registry=reg,
                                                             retry_failed=retry == "failed", versions=versions)
            stopped: errors.EnvhError | None = None
            try:
                _play(planning, runner, store, run_id, requests, todo, retried, max_endpoint_failures,
                      quiet=policy_name == "human")
            except planning.EndpointOutage as exc:
                stopped = exc
            summary = planning.summarize(store.rows(run_id=run_id))
            rows = store.rows(run_id=run_id)
    finally:
        runner.close()
    lock.close()
    _console().print(_summary_table(f"run {run_id} · {out}", summary))
    failure = str(stopped) if stopped is not None else planning.all_failed(rows)
    lingering = [t for t in threading.enumerate() if t.is_alive() and not t.daemon and t not in threads_before] \
        if executor == "inline" else []
    if lingering:  # inline code left threads Python would wait for at exit: forever, for a hostile one
        if failure:
            click.secho(f"error: {failure}", fg="red", err=True)
        _console(True).print(f"note: the episodes left {len(lingering)} thread(s) running "
                             f"({', '.join(t.name for t in lingering[:5])}); the command ends without them.",
                             markup=False, highlight=False, soft_wrap=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2 if failure else 0)
    if stopped is not None:
        raise stopped
    if failure:
        raise errors.EnvhError(failure)


def _play(planning: Any, runner: Any, store: Any, run_id: str, requests: list[Any], todo: list[Any],
          retried: dict[str, int], max_endpoint_failures: int, quiet: bool) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    done = len(requests) - len(todo)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=_console(True),
                        disable=quiet)
    counts = {"ok": 0, "failed": 0, "retried": 0}
    with progress:
        bar = progress.add_task(f"run {run_id}", total=len(requests), completed=done, status="")

        def on_result(t: Any) -> None:
            key = "retried" if not t.final else ("ok" if t.success and not t.error_class else "failed")
            counts[key] += 1
            if t.final and t.key not in retried:
                progress.advance(bar)
            progress.update(bar, status=" ".join(f"{n} {c}" for c, n in counts.items()))

        planning.play(runner, store, todo, on_result, retries=retried,
                      max_endpoint_failures=max_endpoint_failures or None)


@click.command("show")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def show_cmd(run_dir: str, as_json: bool) -> None:
    """Summarise the run in RUN_DIR: success rate, steps and errors, per task."""
    from rich.table import Table

    from . import plan as planning
    from .store import run_dir_exists
    from .trajectory import model_stats

    if not run_dir_exists(run_dir):
        raise errors.EnvhError(f"{run_dir} holds no run (no trajectories.sqlite); create one with `envh run`.")
    with planning.open_store(run_dir) as store:
        reports = []
        for run_id in store.runs():
            rows = store.rows(run_id=run_id)
            manifest = store.manifest(run_id) or {}
            planned = len(manifest.get("config", {}).get("keys", []))
            reports.append({"run_id": run_id, "planned": planned, "manifest": manifest,
                            "attempts_lost": len(store.rows(run_id=run_id, kind="attempt")),
                            **planning.summarize(rows), "rows": rows,
                            "model": model_stats(store.query(run_id=run_id))})
    if as_json:
        click.echo(json.dumps([{k: v for k, v in r.items() if k != "rows"} for r in reports], indent=2,
                              default=repr))
        return
    console = _console()
    for report in reports:
        cfg = report["manifest"].get("config", {})
        console.print(f"[bold]run {report['run_id']}[/bold] policy {cfg.get('policy')} · spec "
                      f"{str(cfg.get('spec_id'))[:12]} · {report['episodes']}/{report['planned']} episodes · "
                      f"{report['attempts_lost']} lost attempt(s) retried")
        console.print(_summary_table("summary", report))
        m = report["model"]
        console.print(f"model: {m['turns']} turns · {m['prompt_tokens']} prompt + {m['completion_tokens']} "
                      f"completion tokens · {m['latency_s']:.3f} s per turn · {m['tokens_per_s']:.1f} tokens/s")
        per_task = Table(title="per task")
        for col in ("task", "episodes", "successes", "mean steps", "errors"):
            per_task.add_column(col)
        by_task: dict[str, list[dict[str, Any]]] = {}
        for row in report["rows"]:
            by_task.setdefault(row["task"] or "default", []).append(row)
        for task, rows in sorted(by_task.items()):
            s = planning.summarize(rows)
            errs = ", ".join(f"{c}:{n}" for c, n in s["errors"].items() if n) or "-"
            per_task.add_row(task, str(s["episodes"]), str(s["successes"]), f"{s['mean_steps']:.1f}", errs)
        console.print(per_task)


@click.command("export")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["messages", "sft", "parquet", "verl", "verl-rl", "trl"]),
              required=True,
              help="messages/trl: chat JSONL (messages + tools; per request: prompt + completion + tools); "
                   "parquet: the same chat columns + index columns + the trajectory; verl: verl multi-turn SFT "
                   "Parquet (messages structs, tools as JSON text); verl-rl: verl RLHFDataset Parquet (prompt = the "
                   "first request, data_source, reward_model, extra_info; one row per trajectory); sft: token level "
                   "from the recorded ids (input_ids, labels, loss_mask, logprobs, rewards). Replies are what the "
                   "model generated (the written text where a tool parser took calls out of it).")
@click.option("--per-request", is_flag=True,
              help="One row per model request: exactly the messages sent, with its own tools and system message, "
                   "and the reply. Default: the full conversation (a reply may follow more context than its "
                   "request held when history was dropped), split where the tools or system message change.")
@click.option("-o", "--output", default=None, help="Output file (default: a file in RUN_DIR named for the format).")
@click.option("--all-attempts", is_flag=True, help="Include attempts lost with a worker.")
@click.option("--system", default=None, help="Replace the system prompt of each conversation.")
@click.option("--success-only", is_flag=True, help="Only successful episodes.")
@click.option("--split", default=None, help="Only tasks of this split.")
@click.option("--spec", default=None, help="Only this spec id (or a prefix of it).")
@click.option("--min-reward", type=float, default=None, help="Only episodes with at least this total reward.")
def export_cmd(run_dir: str, fmt: str, per_request: bool, output: str | None, all_attempts: bool,
               system: str | None, success_only: bool, split: str | None, spec: str | None,
               min_reward: float | None) -> None:
    """Export the trajectories in RUN_DIR for trainers (formats in core/README.md)."""
    from . import export
    from .store import TrajectoryStore, run_dir_exists

    if not run_dir_exists(run_dir):
        raise errors.EnvhError(f"{run_dir} holds no run (no trajectories.sqlite).")
    path = export.check_output(output or export.default_path(run_dir, fmt))
    with TrajectoryStore(run_dir) as store:
        chosen = export.select(store.query(kind=None if all_attempts else "episode"),
                               success=True if success_only else None, split=split, spec=spec, min_reward=min_reward)
        unwritten = [0]
        n = export.export(export.counting_unwritten_calls(chosen, unwritten), fmt, path, system=system,
                          per_request=per_request)
    click.echo(f"wrote {n} rows to {path}")
    if unwritten[0] and fmt != "sft":
        click.echo(f"warning: {unwritten[0]} model turns made native tool calls without the text the model "
                   "generated (the server's tool parser took it; run the openai policy with token_ids=true to "
                   "record it): they are exported as tool_calls, which only a chat template that renders tool "
                   "calls trains on (SmolLM2's does not); --format sft is exact whatever the template", err=True)


def register(cli: click.Group) -> None:
    """Attach the rollout commands to the root group."""
    for command in (run_cmd, show_cmd, export_cmd):
        cli.add_command(command)
