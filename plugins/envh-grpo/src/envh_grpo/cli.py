"""``envh train``: GRPO on envh worlds.

Without a config file it runs the embedded default (CPU, SmolLM2-135M, Toy24, a few
small steps). ``--dry-run`` prints the resolved config, the memory estimate per GPU and
the tokens per step, and exits. ``--nproc N`` starts N processes through ``torchrun``
(DeepSpeed ZeRO on gloo or NCCL); ``deepspeed -m envh_grpo.launch CONFIG`` works as well.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from envh import errors
from envh.hostpaths import data_option


def _overrides(pairs: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE (e.g. loss.kl_coef=0.01)", param_hint="--set")
        out[key.strip()] = yaml.safe_load(raw)
    return out


def _model_config(config: Any) -> tuple[dict[str, Any], str]:
    from .checkpoint import read_json
    from .estimate import KNOWN

    try:
        from .trainer import resolve_model  # imports torch lazily only inside the trainer class

        folder = resolve_model(config.model)
        found = read_json(Path(folder) / "config.json")
        if found:
            return found, str(folder)
    except errors.EnvhError:
        pass
    if config.model in KNOWN:
        return KNOWN[config.model], "built-in figures (model files not on this machine)"
    raise errors.SpecError(f"Model {config.model!r} is not on this machine and has no built-in figures; "
                           "point model at a local Hugging Face folder.")


def dry_run(config: Any, world: int) -> dict[str, Any]:
    """The report ``--dry-run`` prints (also used by tests)."""
    from . import data
    from .config import check, to_data
    from .estimate import memory, tokens_per_step

    mc, where = _model_config(config)
    check(config, world_size=world, model_config=mc)
    report: dict[str, Any] = {"config": to_data(config), "model_config": where, "processes": world,
                              "memory_gib_per_gpu": memory(config, mc, world=world),
                              "tokens_per_step": tokens_per_step(config)}
    try:  # a planning machine may lack the benchmark's data; say so instead of failing the estimate
        report["sources"] = [{"name": s.name, "tasks": len(s.tasks), "weight": s.weight}
                             for s in data.resolve(config.envs)]
    except errors.UnknownNameError:  # a misspelt bridge, split or kind is the user's mistake
        raise
    except Exception as exc:  # noqa: BLE001 - a benchmark without its data here is reported
        report["sources"] = f"not available on this machine: {exc}"
    return report


@click.command("train")
@click.argument("config_path", required=False, metavar="[CONFIG]")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a config key (dotted), repeatable.")
@click.option("--steps", type=int, default=None, help="Number of GRPO steps.")
@click.option("--output-dir", default=None, help="Where metrics and checkpoints go.")
@click.option("--nproc", type=int, default=None, help="Processes to launch (torchrun); default: config.nproc.")
@click.option("--dry-run", is_flag=True, help="Print the resolved config, memory per GPU and tokens per step.")
@click.option("--resume", is_flag=True,
              help="Continue from the latest checkpoint in the output dir (an error when it has none).")
@data_option
def train(config_path: str | None, sets: tuple[str, ...], steps: int | None, output_dir: str | None,
          nproc: int | None, dry_run: bool, resume: bool) -> None:
    """Train a policy with multi-turn GRPO on envh worlds (CONFIG: a YAML file or a shipped
    config name such as h100x8-paper; none: the CPU demo on Toy24)."""
    from .config import load

    overrides = _overrides(sets)
    if steps is not None:
        overrides["steps"] = steps
    if output_dir is not None:
        overrides["output_dir"] = output_dir
    if nproc is not None:
        overrides["nproc"] = nproc
    config = load(config_path, overrides)
    world = int(os.environ.get("WORLD_SIZE", "0")) or config.nproc
    if dry_run:
        click.echo(json.dumps(globals()["dry_run"](config, world), indent=2))
        return
    if resume:  # before any process starts: nothing to resume from is an error, not a new run
        from .checkpoint import require

        require(config, world)
    if config.nproc > 1 and "WORLD_SIZE" not in os.environ:
        _launch(config, config_path, sets, steps, output_dir, resume)
        return
    from .launch import run

    run(config, resume=resume, echo=click.echo)


def _launch(config: Any, config_path: str | None, sets: tuple[str, ...], steps: int | None,
            output_dir: str | None, resume: bool) -> None:
    from . import procs
    from .config import check

    check(config, world_size=config.nproc)  # before starting anything
    # --standalone: the rendezvous store binds a free loopback port itself (a fixed
    # master port collides with any other job on the machine)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={config.nproc}",
           "-m", "envh_grpo.launch"]
    cmd += [config_path] if config_path else []
    cmd += [a for s in sets for a in ("--set", s)]
    cmd += ["--set", f"steps={config.steps}", "--set", f"output_dir={config.output_dir}"]
    cmd += ["--resume"] if resume else []
    del steps, output_dir
    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one node: gloo talks over loopback only
    code = procs.run_job(cmd, env=env).returncode  # Ctrl-C or a crash also ends every worker
    if code:
        raise errors.EnvhError(f"Training processes exited with code {code}: {' '.join(cmd)}")
