"""The Ray executor: warm episode actors on a Ray cluster (a local one by default).

Semantics match the pool: each actor is a worker process running the same
``run_episode`` with warm envs and policies, a memory limit and a per-episode CPU
budget; a dead actor (crash, node loss) or one busy past the time limit plus
``grace_s`` is killed and replaced, its episode recorded as an ``infra_error`` attempt
and retried up to ``retries`` times. When envh starts the local cluster it does so with
a scrubbed environment, so no worker inherits secrets; on a cluster you connect to
(``address``) the actors also drop secret variables at start (best effort: the cluster's
own environment is the operator's). Ray is imported only when this executor is built.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..trajectory import EpisodeRequest, Trajectory, request_to_data, trajectory_from_data
from .base import WorkerConfig, default_workers, is_secret, lost_attempt, scrub_environ, with_timeout


class EpisodeActor:
    """The body of a Ray actor: one warm worker (wrapped with ``ray.remote`` lazily)."""

    def __init__(self, config: dict[str, Any], pass_env: list[str] | bool) -> None:
        import signal

        from .. import runner
        from ..warm import Warm
        from .base import apply_memory_limit, make_worker_registry

        if pass_env is not True:
            for name in [n for n in os.environ if is_secret(n) and n not in set(pass_env)]:  # type: ignore[arg-type]
                del os.environ[name]
        self.config = WorkerConfig(**config)
        apply_memory_limit(self.config)

        def over_cpu(_signum: int, _frame: Any) -> None:
            raise runner._Deadline(f"the episode used its CPU budget of {self.config.cpu_s:g} s")

        signal.signal(signal.SIGXCPU, over_cpu)
        self.warm = Warm(make_worker_registry(self.config))

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        from ..runner import run_episode
        from ..trajectory import request_from_data, trajectory_to_data
        from .base import arm_cpu_budget

        arm_cpu_budget(self.config)
        return trajectory_to_data(run_episode(request_from_data(request), self.warm))

    def pid(self) -> int:
        return os.getpid()


@contextmanager
def _scrubbed_environ(pass_env: list[str] | bool) -> Iterator[None]:
    saved = dict(os.environ)
    clean = scrub_environ(saved, pass_env)
    try:
        for name in set(saved) - set(clean):
            del os.environ[name]
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class RayExecutor:
    """Run episodes on ``workers`` Ray actors. Options as for the pool, plus ``address``
    (an existing cluster; default: start a local one) and ``cpus_per_worker``."""

    def __init__(self, workers: int | None = None, *, address: str | None = None, timeout_s: float | None = None,
                 grace_s: float = 5.0, retries: int = 2, memory_mb: int | None = None, cpu_s: float | None = None,
                 pass_env: Iterable[str] | bool = (), plugins: Iterable[str] = (), entry_points: bool = True,
                 cpus_per_worker: float = 1.0, **_ignored: Any) -> None:
        import ray

        self.ray = ray
        self.workers = int(workers or default_workers())
        self.timeout_s, self.grace_s, self.retries = timeout_s, grace_s, retries
        self.pass_env: list[str] | bool = pass_env if pass_env is True else list(pass_env or ())
        self.config = {"memory_mb": memory_mb, "cpu_s": cpu_s, "plugins": tuple(plugins),
                       "entry_points": entry_points}
        if not ray.is_initialized():
            with _scrubbed_environ(self.pass_env):
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False,
                         num_cpus=None if address else max(os.cpu_count() or 1, int(self.workers * cpus_per_worker)))
        self.actor_class = ray.remote(num_cpus=cpus_per_worker, max_restarts=0)(EpisodeActor)
        self.actors: list[Any] = []

    def _spawn(self) -> Any:
        actor = self.actor_class.remote(self.config, self.pass_env)
        self.actors.append(actor)
        return actor

    def _retire(self, actor: Any) -> None:
        if actor in self.actors:
            self.actors.remove(actor)
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - the actor may already be gone
            pass

    def pids(self) -> list[int]:
        return list(self.ray.get([a.pid.remote() for a in self.actors]))

    def run(self, requests: Iterable[EpisodeRequest]) -> Iterator[Trajectory]:
        queue = collections.deque(with_timeout(r, self.timeout_s) for r in requests)
        inflight: dict[Any, tuple[Any, EpisodeRequest, float]] = {}
        try:
            yield from self._loop(queue, inflight)
        finally:  # the caller stopped early: episodes still playing must not leak into the next run
            for actor, _, _ in inflight.values():
                self._retire(actor)

    def _loop(self, queue: collections.deque[EpisodeRequest],
              inflight: dict[Any, tuple[Any, EpisodeRequest, float]]) -> Iterator[Trajectory]:
        ray = self.ray
        while queue or inflight:
            while queue and len(self.actors) < self.workers:
                self._spawn()
            busy = {actor for actor, _, _ in inflight.values()}
            for actor in [a for a in self.actors if a not in busy]:
                if not queue:
                    break
                request = queue.popleft()
                inflight[actor.run.remote(request_to_data(request))] = (actor, request, time.monotonic())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=self._wait_s(inflight))
            for ref in ready:
                actor, request, _ = inflight.pop(ref)
                try:
                    yield trajectory_from_data(ray.get(ref))
                except ray.exceptions.RayError as exc:
                    self._retire(actor)
                    yield self._lost(request, f"Ray actor failed: {type(exc).__name__}: {str(exc)[:500]}", queue)
            now = time.monotonic()
            for ref, (actor, request, started) in list(inflight.items()):
                if request.timeout_s and now - started > request.timeout_s + self.grace_s:
                    del inflight[ref]
                    self._retire(actor)
                    yield self._lost(request, f"Ray actor did not finish within the episode's "
                                     f"{request.timeout_s:g} s limit + {self.grace_s:g} s grace (hung)", queue)

    def _wait_s(self, inflight: dict[Any, tuple[Any, EpisodeRequest, float]]) -> float:
        now, wait = time.monotonic(), 1.0
        for _, request, started in inflight.values():
            if request.timeout_s:
                wait = min(wait, started + request.timeout_s + self.grace_s - now)
        return max(0.0, wait)

    def _lost(self, request: EpisodeRequest, message: str, queue: collections.deque[EpisodeRequest]) -> Trajectory:
        record, retry = lost_attempt(
            request, f"{message} during episode {request.key!r} (attempt {request.attempt + 1} of "
                     f"{self.retries + 1})", self.retries, "ray")
        if retry is not None:
            queue.appendleft(retry)
        return record

    def close(self) -> None:
        for actor in list(self.actors):
            self._retire(actor)

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
