"""Per-process entry point for launchers:

    torchrun --nproc_per_node 8 -m envh_grpo.launch CONFIG [--set KEY=VALUE ...] [--resume]
    deepspeed --num_gpus 8 --module envh_grpo.launch CONFIG ...

Each process reads the same config; rank and world size come from the launcher's
environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any


def run(config: Any, *, resume: bool = False, echo: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Train with ``config`` in this process; per-step lines and a progress bar on rank 0."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .trainer import GRPOTrainer

    trainer = GRPOTrainer(config, resume=resume, echo=echo)
    show = trainer.rank == 0 and config.log.progress
    try:
        with Progress(TextColumn("grpo"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), disable=not show, transient=False) as bar:
            task = bar.add_task("", total=config.steps, completed=trainer.step_no)

            def progress(record: dict[str, Any]) -> None:
                line = (f"step {record['step']}/{config.steps}  loss {record['loss']:+.4f}  "
                        f"reward {record['reward']:+.3f}  success {record['success']:.2f}  "
                        f"turns {record['turns']:.1f}  gen {record['gen_tokens_per_s']:.1f} tok/s  "
                        f"{record['time/step_s']:.1f} s")
                bar.update(task, completed=record["step"], description=line)
                if echo is not None and trainer.rank == 0:
                    echo(line)

            records = trainer.train(progress)
        if trainer.rank == 0 and echo is not None:
            echo(f"metrics: {os.path.join(config.output_dir, 'metrics.jsonl')}")
        if config.save_every == 0 and trainer.step_no > 0:
            trainer.save()
        return records
    finally:
        trainer.close()


def main(argv: list[str] | None = None) -> int:
    from envh import errors

    from .cli import _overrides
    from .config import load

    parser = argparse.ArgumentParser(prog="envh_grpo.launch")
    parser.add_argument("config", nargs="?")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--local_rank", type=int, default=None)  # the deepspeed launcher passes it
    args = parser.parse_args(argv)
    try:
        config = load(args.config, _overrides(tuple(args.set)))
        run(config, resume=args.resume, echo=print if os.environ.get("RANK", "0") == "0" else None)
    except errors.EnvhError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
