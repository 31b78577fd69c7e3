"""A rollout run: which episodes to play (the plan), playing them into a store, resuming,
and summarising (success rate with a Wilson 95% interval, steps, error classes).

A run lives in one directory: ``trajectories.sqlite`` holds its manifest and every
trajectory. Episode keys are ``TASK#K`` (K-th rollout of the task, seed = ``seed + K``),
so a resumed run skips exactly the keys already stored and plays the rest.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import errors
from ..plugins.manager import Registry, get_registry
from ..spec import make, parse_spec, spec_id, spec_to_data
from ..types import TaskRef
from .store import TrajectoryStore, build_manifest
from .trajectory import ERROR_CLASSES, EpisodeRequest, Trajectory
from .warm import package_versions


def select_tasks(spec: Mapping[str, Any], registry: Registry, *, task_ids: Iterable[str] = (),
                 n_tasks: int | None = None, split: str | None = None) -> list[TaskRef | None]:
    """Tasks named by id (``ID`` or ``SPLIT/ID``), the first N (of a split), or a whole split;
    ``[None]`` (the bridge's default task) when nothing is asked."""
    ids = list(task_ids)
    if not ids and n_tasks is None and split is None:
        return [None]
    env = make(dict(spec), registry=registry)
    try:
        available = env.list_tasks(split)
    finally:
        env.close()
    if ids:
        chosen = []
        for wanted in ids:
            match = [t for t in available if wanted in (t.instance_id, f"{t.split}/{t.instance_id}", str(t))]
            if not match:
                sample = ", ".join(str(t) for t in available[:8]) + (", ..." if len(available) > 8 else "")
                raise errors.EnvhError(f"Unknown task {wanted!r}. Tasks include: {sample or '(none)'}")
            chosen.append(match[0])
        return list(chosen)
    return list(available[:n_tasks] if n_tasks is not None else available)


def build_plan(spec_source: Any, *, policy: str, k: int = 1, tasks: list[TaskRef | None], seed: int = 0,
               max_steps: int = 100, timeout_s: float | None = None, run_id: str = "",
               policy_options: dict[str, Any] | None = None,
               registry: Registry | None = None) -> list[EpisodeRequest]:
    """One request per (task, rollout index)."""
    reg = registry or get_registry()
    parsed = parse_spec(spec_source, reg)
    data, sid = spec_to_data(parsed, reg), spec_id(parsed, reg)
    return [EpisodeRequest(key=f"{task if task is not None else 'default'}#{r}", spec=data, spec_id=sid,
                           task=task, seed=seed + r, policy=policy, policy_options=dict(policy_options or {}),
                           run_id=run_id, max_steps=max_steps, timeout_s=timeout_s)
            for task in tasks for r in range(k)]


def start_or_resume(store: TrajectoryStore, plan_config: dict[str, Any], requests: list[EpisodeRequest],
                    *, resume: bool, registry: Registry) -> tuple[str, list[EpisodeRequest]]:
    """The run id and the requests still to play. A new run writes its manifest; a
    resumed one must have been started with the same spec, policy and episodes."""
    runs = store.runs()
    if runs and not resume:
        raise errors.EnvhError(f"{store.path.parent} already holds run {runs[-1]}: pass --resume to finish "
                               "it, or choose another --out directory.")
    if runs:
        run_id = runs[-1]
        manifest = store.manifest(run_id) or {}
        old = manifest.get("config", {})
        for field in ("spec_id", "policy", "keys"):
            if old.get(field) != plan_config.get(field):
                raise errors.EnvhError(
                    f"Cannot resume run {run_id}: its {field} differs from this command's. Run the "
                    "same command with --resume, or use another --out directory.")
        done = store.completed_keys(run_id)
    else:
        run_id, done = uuid.uuid4().hex[:12], set()
        store.create_run(run_id, build_manifest(
            run_id=run_id, config=plan_config, spec_ids=[r.spec_id for r in requests],
            seeds=[r.seed for r in requests], versions=package_versions(registry)))
    todo = [r for r in requests if r.key not in done]
    return run_id, [_with_run(r, run_id) for r in todo]


def _with_run(request: EpisodeRequest, run_id: str) -> EpisodeRequest:
    import attrs

    return attrs.evolve(request, run_id=run_id)


def play(executor: Any, store: TrajectoryStore, requests: list[EpisodeRequest],
         on_result: Callable[[Trajectory], None] | None = None) -> None:
    """Run every request, appending each trajectory to the store the moment it arrives."""
    for trajectory in executor.run(requests):
        store.append(trajectory)
        if on_result is not None:
            on_result(trajectory)


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Success rate (Wilson 95%), mean steps and error counts of final episode rows."""
    n = len(rows)
    wins = sum(1 for r in rows if r.get("success"))
    low, high = wilson(wins, n)
    errors_by_class = Counter(r["error_class"] for r in rows if r.get("error_class"))
    return {"episodes": n, "successes": wins, "success_rate": wins / n if n else 0.0,
            "wilson_low": low, "wilson_high": high,
            "mean_steps": sum(r.get("steps") or 0 for r in rows) / n if n else 0.0,
            "invalid_steps": sum(r.get("invalid_steps") or 0 for r in rows),
            "errors": {c: errors_by_class.get(c, 0) for c in ERROR_CLASSES}}


def open_store(out: str | Path) -> TrajectoryStore:
    return TrajectoryStore(out)
