"""Training and evaluation tasks: env sources mixed by weight, drawn by position.

The g-th group of a run is a pure function of (seed, g): resuming at a data position
replays exactly the groups a continuous run would have drawn, on any number of
processes. Within a source, groups are drawn without replacement: each epoch over its
tasks follows a seeded permutation. A harness pool (``envh rig``'s ``pool/specs/*.json``) expands into one source
per spec, sharing the pool's weight; list the original env as another source to mix
original and reshaped worlds by ratio.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import attrs
import envh
from envh import errors

from .config import EnvSource
from .rollout import derive_seed


@attrs.frozen(kw_only=True)
class Source:
    """A resolved source: a spec (data), its display name, tasks and weight."""

    name: str
    spec: Any
    tasks: tuple[Any, ...]
    weight: float


def _tasks(env: Any, source: EnvSource, name: str) -> list[Any]:
    available = env.list_tasks(source.split)
    if not source.tasks:
        if not available:
            raise errors.SpecError(f"Env source {name} offers no tasks for split {source.split!r}")
        return list(available)
    by_id = {t.instance_id: t for t in available}
    out = []
    for instance in source.tasks:
        task = by_id.get(instance)
        if task is None:  # an instance the bridge does not list (e.g. a generated puzzle) is still valid
            suite = available[0].suite if available else name
            task = envh.TaskRef(suite=suite, split=source.split or "default", instance_id=str(instance))
        out.append(task)
    return out


def resolve(sources: tuple[EnvSource, ...]) -> list[Source]:
    """Check every source now (specs build, tasks exist) and expand pools."""
    out: list[Source] = []
    for k, src in enumerate(sources):
        if src.weight < 0:
            raise errors.SpecError(f"envs[{k}].weight must be >= 0, got {src.weight}")
        if src.pool is not None:
            files = sorted((Path(src.pool) / "specs").glob("*.json")) or sorted(Path(src.pool).glob("*.json"))
            if not files:
                raise errors.SpecError(f"envs[{k}].pool {src.pool!r} holds no spec files (pool/specs/*.json)")
            specs = [(f.stem, json.loads(f.read_text())) for f in files]
        else:
            specs = [(str(src.spec) if isinstance(src.spec, str) else f"envs[{k}]", src.spec)]
        for name, spec in specs:
            spec_data = spec.get("spec", spec) if isinstance(spec, dict) and "bridge" not in spec else spec
            env = envh.make(spec_data)
            try:
                tasks = _tasks(env, src, name)
            finally:
                env.close()
            out.append(Source(name=name, spec=spec_data, tasks=tuple(tasks), weight=src.weight / len(specs)))
    if not out or not any(s.weight > 0 for s in out):
        raise errors.SpecError("No env source with a weight > 0")
    return out


def draw(sources: list[Source], seed: int, position: int) -> tuple[int, Any]:
    """(source index, task) of the group at ``position``.

    The source is drawn by weight (the mixing ratio); within a source, tasks are drawn
    without replacement: its n-th group takes entry ``n mod len(tasks)`` of epoch
    ``n // len(tasks)``'s seeded permutation, so every task is seen once per epoch.
    """
    choices = _source_choices(seed, tuple(s.weight for s in sources), position + 1)
    k = choices[position]
    n = choices[:position].count(k)  # groups this source gave before this one
    tasks = sources[k].tasks
    epoch, index = divmod(n, len(tasks))
    return k, tasks[epoch_order(seed, k, epoch, len(tasks))[index]]


def epoch_order(seed: int, source: int, epoch: int, n: int) -> list[int]:
    """The task order of ``source`` in ``epoch``: a seeded permutation of range(n)."""
    order = list(range(n))
    random.Random(derive_seed(seed, "epoch", source, epoch)).shuffle(order)
    return order


_CHOICES: dict[tuple[int, tuple[float, ...]], list[int]] = {}


def _source_choices(seed: int, weights: tuple[float, ...], count: int) -> list[int]:
    """The source of each of the first ``count`` groups (a pure function of seed and weights)."""
    known = _CHOICES.setdefault((seed, weights), [])
    while len(known) < count:
        rng = random.Random(derive_seed(seed, "group", len(known)))
        known.append(rng.choices(range(len(weights)), weights=weights)[0] if len(weights) > 1 else 0)
    return known


def eval_items(sources: list[Source], episodes: int) -> list[tuple[int, Any]]:
    """The fixed held-out list: the first ``episodes`` tasks, round-robin over sources."""
    out: list[tuple[int, Any]] = []
    k = 0
    while len(out) < episodes and any(len(s.tasks) > k for s in sources):
        out += [(i, s.tasks[k]) for i, s in enumerate(sources) if k < len(s.tasks)]
        k += 1
    return out[:episodes]
