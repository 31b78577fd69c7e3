"""envh hook implementations: the ``grpo`` trainer, its ``grpo-remote`` policy and ``envh train``.

Only ``@hookimpl`` functions returning records; the trainer loads lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envh import PolicyInfo, TrainerInfo, hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def envh_trainers() -> list[TrainerInfo]:
    return [TrainerInfo(
        name="grpo", factory="envh_grpo.trainer:GRPOTrainer",
        description="multi-turn GRPO: token-faithful rollouts, cost-aware reward, DeepSpeed ZeRO")]


@hookimpl
def envh_policies() -> list[PolicyInfo]:
    return [PolicyInfo(
        name="grpo-remote", factory="envh_grpo.remote:RemotePolicy", host_access=("network",),
        description="asks a GRPO trainer's generation server for each turn (rollouts in executor workers)")]


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    from envh_grpo.cli import train

    cli.add_command(train)
