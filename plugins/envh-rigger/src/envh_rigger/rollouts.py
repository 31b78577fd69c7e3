"""Rollouts for the loop: episodes played by the rollout runner, kept in the trajectory store.

Each episode has a key naming its task, spec id, phase and seed. A key already in the
store is read back instead of replayed, so a resumed run redoes no finished episode
(even halfway through a validation). Episodes run in this process with warm envs and
policies; a failure of env or policy is a trajectory with an error class, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from envh import Registry, TaskRef, spec_id
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore, build_manifest
from envh.rollout.trajectory import EpisodeRequest, Trajectory, trajectory_from_json
from envh.rollout.warm import Warm, package_versions

RUN_ID = "rig"
EPISODE_SEED = "episode_seed"


class EpisodeSeededWarm(Warm):
    """Warm policies whose sampling seed follows the episode's seed.

    A policy with an integer ``seed`` attribute (local, random) derives its sampling from
    it at ``start``; the loop needs K *different* rollouts of one task, so the request's
    ``episode_seed`` option is added to the policy's own seed instead of building (and
    loading a model for) one policy per seed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._base_seed: dict[int, int] = {}

    def policy(self, spec: str, options: dict[str, Any]) -> Any:
        rest = {k: v for k, v in options.items() if k != EPISODE_SEED}
        policy = super().policy(spec, rest)
        if isinstance(getattr(policy, "seed", None), int) and EPISODE_SEED in options:
            base = self._base_seed.setdefault(id(policy), policy.seed)
            policy.seed = base + int(options[EPISODE_SEED])
        return policy

    def drop_policy(self, spec: str, options: dict[str, Any]) -> None:
        self._base_seed.clear()
        super().drop_policy(spec, {k: v for k, v in options.items() if k != EPISODE_SEED})


class Rollouts:
    """Plays and caches episodes of one rig run (``OUT/trajectories.sqlite``)."""

    def __init__(self, out: str | Path, *, policy: str, registry: Registry,
                 policy_options: dict[str, Any] | None = None, max_steps: int = 30,
                 timeout_s: float | None = 300.0, config: dict[str, Any] | None = None,
                 on_episode: Callable[[Trajectory], None] | None = None) -> None:
        self.store = TrajectoryStore(out)
        self.registry = registry
        self.policy, self.policy_options = policy, dict(policy_options or {})
        self.max_steps, self.timeout_s = max_steps, timeout_s
        self.warm = EpisodeSeededWarm(registry)
        self.on_episode = on_episode
        if RUN_ID not in self.store.runs():
            self.store.create_run(RUN_ID, build_manifest(
                run_id=RUN_ID, config=config or {}, spec_ids=[], seeds=[],
                versions=package_versions(registry)))
        self._done = self.store.completed_keys(RUN_ID)
        self.played = 0  # episodes actually run by this process (not read back)

    def key(self, task: TaskRef, sid: str, phase: str, seed: int) -> str:
        return f"{task}|{sid[:16]}|{phase}|{seed}"

    def cached(self, key: str) -> Trajectory | None:
        if key not in self._done:
            return None
        row = self.store.db.execute(
            "SELECT data FROM trajectories WHERE run_id = ? AND key = ? AND kind = 'episode'",
            (RUN_ID, key)).fetchone()
        return None if row is None else trajectory_from_json(row[0])

    def run(self, spec: dict[str, Any], task: TaskRef, seeds: Sequence[int], phase: str) -> list[Trajectory]:
        """Episodes of ``spec`` on ``task`` for ``seeds`` (read back when already stored)."""
        sid = spec_id(spec, self.registry)
        out = []
        for seed in seeds:
            key = self.key(task, sid, phase, seed)
            traj = self.cached(key)
            if traj is None:
                request = EpisodeRequest(
                    key=key, spec=spec, spec_id=sid, task=task, seed=seed, policy=self.policy,
                    policy_options={**self.policy_options, EPISODE_SEED: seed}, run_id=RUN_ID, max_steps=self.max_steps,
                    timeout_s=self.timeout_s)
                traj = run_episode(request, self.warm)
                self.store.append(traj)
                self._done.add(key)
                self.played += 1
                if self.on_episode is not None:
                    self.on_episode(traj)
            out.append(traj)
        return out

    def count(self, phase_prefix: str | None = None) -> int:
        """Stored episodes of this run (all phases, or those whose phase starts with ...)."""
        if phase_prefix is None:
            return len(self._done)
        return sum(1 for k in self._done if k.split("|")[2].startswith(phase_prefix))

    def close(self) -> None:
        self.warm.close()  # problems closing a warm env do not change stored results
        self.store.close()
