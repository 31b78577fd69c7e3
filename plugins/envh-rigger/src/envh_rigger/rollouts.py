"""Rollouts for the loop: episodes played by the rollout runner, kept in the trajectory store.

Each episode has a key naming its task, spec id, phase and seed. A key already in the
store is read back instead of replayed, so a resumed run redoes no finished episode
(even halfway through a validation). Episodes run in this process (``workers=1``) or in
a pool of warm worker processes; either way a failure of env or policy is a trajectory
with an error class, never a crash. Each episode's seed reaches the policy's ``start``,
so K rollouts of one task are K different samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from envh import Registry, TaskRef, spec_id
from envh.rollout import (
    EpisodeRequest,
    Trajectory,
    TrajectoryStore,
    Warm,
    build_manifest,
    package_versions,
    run_episode,
)

RUN_ID = "rig"


class Rollouts:
    """Plays and caches episodes of one rig run (``OUT/trajectories.sqlite``)."""

    def __init__(self, out: str | Path, *, policy: str, registry: Registry,
                 policy_options: dict[str, Any] | None = None, max_steps: int = 30,
                 timeout_s: float | None = 300.0, config: dict[str, Any] | None = None,
                 on_episode: Callable[[Trajectory], None] | None = None, workers: int = 1) -> None:
        self.store = TrajectoryStore(out)
        self.registry = registry
        self.policy, self.policy_options = policy, dict(policy_options or {})
        self.max_steps, self.timeout_s = max_steps, timeout_s
        self.warm = Warm(registry)
        self.workers = max(1, int(workers))
        self.out = Path(out)
        self._pool: Any = None
        if self.workers > 1 and policy.split(":")[0] == "local":
            self.policy_options.setdefault("threads", 1)  # one torch thread per worker process
        self.on_episode = on_episode
        if RUN_ID not in self.store.runs():
            self.store.create_run(RUN_ID, build_manifest(
                run_id=RUN_ID, config=config or {}, spec_ids=[], seeds=[],
                versions=package_versions(registry)))
        # stored episodes, by key: read back through the store's query API, never its tables
        self._stored: dict[str, Trajectory] = {t.key: t for t in self.store.query(run_id=RUN_ID)}
        self._done = set(self._stored)
        self.played = 0  # episodes actually run by this process (not read back)

    def key(self, task: TaskRef, sid: str, phase: str, seed: int) -> str:
        return f"{task}|{sid[:16]}|{phase}|{seed}"

    def cached(self, key: str) -> Trajectory | None:
        return self._stored.get(key)

    def run(self, spec: dict[str, Any], task: TaskRef, seeds: Sequence[int], phase: str) -> list[Trajectory]:
        """Episodes of ``spec`` on ``task`` for ``seeds`` (read back when already stored)."""
        sid = spec_id(spec, self.registry)
        found: dict[str, Trajectory] = {}
        todo: dict[str, EpisodeRequest] = {}  # by key: a seed listed twice plays once
        keys = [self.key(task, sid, phase, seed) for seed in seeds]
        for key, seed in zip(keys, seeds, strict=True):
            traj = self.cached(key)
            if traj is not None:
                found[key] = traj
            elif key not in todo:
                todo[key] = EpisodeRequest(
                    key=key, spec=spec, spec_id=sid, task=task, seed=seed, policy=self.policy,
                    policy_options=dict(self.policy_options), run_id=RUN_ID, max_steps=self.max_steps,
                    timeout_s=self.timeout_s)
        for traj in self._play(list(todo.values())):
            self.store.append(traj)
            self._done.add(traj.key)
            self._stored[traj.key] = traj
            self.played += 1
            found[traj.key] = traj
            if self.on_episode is not None:
                self.on_episode(traj)
        return [found[key] for key in keys]

    def _play(self, requests: list[EpisodeRequest]) -> Iterator[Trajectory]:
        if self.workers == 1 or len(requests) < 2:
            for request in requests:
                yield run_episode(request, self.warm)
            return
        if self._pool is None:
            pool = self.registry.executor("pool").load()
            self._pool = pool(workers=self.workers, log_path=str(self.out / "workers.log"))
        yield from self._pool.run(requests)

    def count(self, phase_prefix: str | None = None) -> int:
        """Stored episodes of this run (all phases, or those whose phase starts with ...)."""
        if phase_prefix is None:
            return len(self._done)
        return sum(1 for k in self._done if k.split("|")[2].startswith(phase_prefix))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.warm.close()  # problems closing a warm env do not change stored results
        self.store.close()
