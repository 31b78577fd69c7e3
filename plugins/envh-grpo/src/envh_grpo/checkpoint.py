"""Checkpoints that resume exactly: model, optimizer, scheduler, every process's RNG
state, the data position and the reward state (the annealing epoch).

Layout under ``output_dir/checkpoints``: ``step-N/`` (DeepSpeed's files, or
``trainer.pt`` without DeepSpeed), ``step-N/rng-rank{r}.pt``, ``step-N/state.json``, and
``latest`` naming the newest complete one; ``latest`` is written last, so a run killed
while saving resumes from the previous checkpoint. Resuming refuses a different
configuration (only ``steps``, ``output_dir``, ``save_every``, ``eval``, ``log`` and
``rollout``, which says where episodes run and not what they are, may change).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import torch
from envh import errors

MUTABLE = ("steps", "output_dir", "save_every", "eval", "log", "rollout")  # rollout: where, not what


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def config_hash(config: Any) -> str:
    from .config import to_data

    data = {k: v for k, v in to_data(config).items() if k not in MUTABLE}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _barrier(trainer: Any) -> None:
    if trainer.world > 1:
        import torch.distributed as dist

        dist.barrier()


def save(trainer: Any) -> Path:
    root = Path(trainer.config.output_dir) / "checkpoints"
    tag = f"step-{trainer.step_no}"
    folder = root / tag
    folder.mkdir(parents=True, exist_ok=True)
    if trainer.engine is not None:
        trainer.engine.save_checkpoint(str(root), tag=tag, save_latest=False)
    elif trainer.rank == 0:
        torch.save({"model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict(),
                    "scheduler": trainer.scheduler.state_dict()}, folder / "trainer.pt")
    torch.save({"torch": torch.get_rng_state(), "python": random.getstate(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
               folder / f"rng-rank{trainer.rank}.pt")
    _barrier(trainer)
    if trainer.rank == 0:
        state = {"step": trainer.step_no, "data_position": trainer.position, "reward_epoch": trainer.step_no,
                 "world_size": trainer.world, "config_hash": config_hash(trainer.config)}
        (folder / "state.json").write_text(json.dumps(state, indent=2))
        tmp = root / "latest.tmp"
        tmp.write_text(tag)
        os.replace(tmp, root / "latest")
    _barrier(trainer)
    return folder


def latest(config: Any, world: int) -> tuple[str, dict[str, Any]] | None:
    """(tag, state) of the checkpoint a resume would load, checked against ``config``
    before anything is loaded; ``None`` when the run has none yet."""
    root = Path(config.output_dir) / "checkpoints"
    if not (root / "latest").is_file():
        return None
    tag = (root / "latest").read_text().strip()
    folder = root / tag
    state = read_json(folder / "state.json")
    if state is None:
        raise errors.StateError(f"Checkpoint {folder} has no readable state.json")
    if state.get("config_hash") != config_hash(config):
        raise errors.StateError(
            f"Checkpoint {folder} was written with a different training config; resume with the same "
            f"config (only {', '.join(MUTABLE)} may change) or choose another output_dir.")
    if state.get("world_size") != world:
        raise errors.StateError(f"Checkpoint {folder} was written by {state.get('world_size')} processes; "
                                f"resume with the same number (now {world}).")
    return tag, state


def require(config: Any, world: int) -> tuple[str, dict[str, Any]]:
    """``latest``, refusing a resume that has nothing to resume from (a mistyped
    ``output_dir`` would otherwise train from scratch and mix two runs' metrics)."""
    found = latest(config, world)
    if found is None:
        root = Path(config.output_dir) / "checkpoints"
        raise errors.StateError(f"--resume: there is no checkpoint in {root} (no {root / 'latest'}); run without "
                                "--resume to start a new run, or point output_dir at the run to continue.")
    return found


def load(trainer: Any) -> bool:
    """Restore the newest checkpoint; False when there is none yet."""
    root = Path(trainer.config.output_dir) / "checkpoints"
    found = latest(trainer.config, trainer.world)
    if found is None:
        return False
    tag, state = found
    folder = root / tag
    if trainer.engine is not None:
        path, _ = trainer.engine.load_checkpoint(str(root), tag=tag, load_optimizer_states=True,
                                                 load_lr_scheduler_states=True)
        if path is None:
            raise errors.StateError(f"DeepSpeed could not load checkpoint {folder}")
    else:
        blob = torch.load(folder / "trainer.pt", map_location=trainer.device, weights_only=False)
        trainer.model.load_state_dict(blob["model"])
        trainer.optimizer.load_state_dict(blob["optimizer"])
        trainer.scheduler.load_state_dict(blob["scheduler"])
    rng = torch.load(folder / f"rng-rank{trainer.rank}.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    if rng.get("cuda") is not None:
        torch.cuda.set_rng_state_all(rng["cuda"])
    trainer.step_no = int(state["step"])
    trainer.position = int(state["data_position"])
    if trainer.rank == 0:
        _truncate_metrics(Path(trainer.config.output_dir) / "metrics.jsonl", trainer.step_no)
    if not hasattr(trainer.gen, "pad"):  # a rebuilt engine must serve the restored weights
        trainer.gen.sync(trainer.model)
    return True


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop the rows logged after the checkpoint (and a line torn by a kill): the resumed
    run logs those steps again, and two rows for one step would both be read."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return
    keep = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and int(row.get("step", 0)) <= step:
            keep.append(line)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
    os.replace(tmp, path)
