"""Metrics sinks: JSONL always (rank 0), TensorBoard and wandb when installed.

``log.tensorboard`` / ``log.wandb``: ``auto`` (use it when the package imports),
``true`` (required: fail if missing) or ``false``. wandb runs offline unless
``WANDB_API_KEY`` or ``WANDB_MODE`` says otherwise, so nothing leaves the machine by default.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from envh import errors


def _wanted(setting: str, module: str) -> bool:
    present = importlib.util.find_spec(module) is not None
    if setting == "true" and not present:
        raise errors.SpecError(f"log asks for {module}, which is not installed (pip install {module})")
    return setting != "false" and present


class Metrics:
    def __init__(self, config: Any, output_dir: Path, *, rank: int = 0) -> None:
        self.active = rank == 0
        self.path = output_dir / "metrics.jsonl"
        self.tb: Any = None
        self.wandb: Any = None
        if not self.active:
            return
        output_dir.mkdir(parents=True, exist_ok=True)
        log = config.log
        if _wanted(log.tensorboard, "tensorboard"):
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(output_dir / "tensorboard"))
        if _wanted(log.wandb, "wandb"):
            import wandb

            from .config import to_data

            mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
            self.wandb = wandb.init(project=log.wandb_project, dir=str(output_dir), mode=mode,
                                    config=to_data(config))
        self.jsonl = config.log.jsonl

    def log(self, record: dict[str, Any]) -> None:
        if not self.active:
            return
        if self.jsonl:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, sort_keys=True) + "\n")
        step = int(record.get("step", 0))
        numbers = {k: float(v) for k, v in record.items() if isinstance(v, (int, float)) and k != "step"}
        if self.tb is not None:
            for key, value in numbers.items():
                self.tb.add_scalar(key, value, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(numbers, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
            self.tb = None
        if self.wandb is not None:
            self.wandb.finish()
            self.wandb = None
