"""The process-pool executor (the default): warm worker processes, each running one
episode at a time, so N workers really play N episodes at once (LLM-bound episodes
overlap their waits; CPU-bound ones use N cores).

Isolation matches one-fresh-process-per-episode where it matters: each worker is a
separate interpreter started with a scrubbed environment (no ``*_API_KEY``, ``*_TOKEN``
or cloud credentials unless passed with ``pass_env``), an address-space limit and a
per-episode CPU budget; what it keeps between episodes is only its warm env and policy,
which ``reset`` in place. A worker that crashes, or stays busy past the episode's time
limit plus ``grace_s``, is killed and replaced; its episode is recorded as an
``infra_error`` attempt and retried up to ``retries`` times.
"""

from __future__ import annotations

import collections
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ... import errors
from ..trajectory import EpisodeRequest, Trajectory, request_to_data, trajectory_from_data
from .base import default_workers, describe_exit, lost_attempt, scrub_environ, with_timeout
from .worker import FrameReader, encode


class _Worker:
    """One worker process and the episode it is playing."""

    def __init__(self, cmd: list[str], env: dict[str, str], config: dict[str, Any], stderr: IO[Any] | None) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     env=env, close_fds=True, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        os.set_blocking(self.stdout.fileno(), False)
        self.reader = FrameReader()
        self.request: EpisodeRequest | None = None
        self.started = 0.0
        self.ready = False
        self.send({"op": "config", **config})

    @property
    def name(self) -> str:
        return f"pool:{self.proc.pid}"

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(encode(message))
        self.stdin.flush()

    def kill(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return self.proc.wait()


class PoolExecutor:
    """Run episodes in ``workers`` warm processes. Options: ``timeout_s`` (per episode,
    when the request sets none), ``grace_s``, ``retries``, ``memory_mb`` (address space
    per worker, 16 GiB unless set; 0 lifts it), ``cpu_s``,
    ``pass_env`` (names, or True for everything), ``plugins`` / ``entry_points`` (what
    the workers load), ``log_path`` (workers' stderr)."""

    def __init__(self, workers: int | None = None, *, timeout_s: float | None = None, grace_s: float = 5.0,
                 retries: int = 2, memory_mb: int | None = 16384, cpu_s: float | None = None,
                 pass_env: Iterable[str] | bool = (), plugins: Iterable[str] = (), entry_points: bool = True,
                 log_path: str | None = None, python: str | None = None) -> None:
        self.workers = int(workers or default_workers())
        self.timeout_s, self.grace_s, self.retries = timeout_s, grace_s, retries
        self.config = {"memory_mb": memory_mb, "cpu_s": cpu_s, "plugins": list(plugins),
                       "entry_points": entry_points}
        self.env = scrub_environ(os.environ, pass_env if pass_env is True else list(pass_env or ()))
        self.cmd = [python or sys.executable, "-m", "envh.rollout.executors.worker"]
        self.log = open(log_path, "ab") if log_path else None  # noqa: SIM115 - lives as long as the pool
        self.pool: list[_Worker] = []
        self.selector = selectors.DefaultSelector()
        self.deaths_at_start = 0

    # -- workers -------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        worker = _Worker(self.cmd, self.env, self.config, self.log)
        self.selector.register(worker.stdout, selectors.EVENT_READ, worker)
        self.pool.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> int | None:
        try:
            self.selector.unregister(worker.stdout)
        except (KeyError, ValueError):
            pass
        self.pool.remove(worker)
        return worker.kill()

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.pool]

    # -- running -------------------------------------------------------------------------
    def run(self, requests: Iterable[EpisodeRequest]) -> Iterator[Trajectory]:
        queue = collections.deque(with_timeout(r, self.timeout_s) for r in requests)
        try:
            yield from self._loop(queue)
        finally:  # the caller stopped early: episodes still playing must not leak into the next run
            for worker in [w for w in self.pool if w.request is not None]:
                self._retire(worker)

    def _loop(self, queue: collections.deque[EpisodeRequest]) -> Iterator[Trajectory]:
        while queue or any(w.request is not None for w in self.pool):
            while queue and len(self.pool) < self.workers:
                self._spawn()
            for worker in self.pool:
                if worker.request is None and queue:
                    worker.request, worker.started = queue.popleft(), time.monotonic()
                    try:
                        worker.send({"op": "run", "request": request_to_data(worker.request)})
                    except OSError:
                        pass  # the worker is gone; its end of output reports it below
            for key, _ in self.selector.select(timeout=self._wait_s()):
                yield from self._read(key.data, queue)
            now = time.monotonic()
            for worker in list(self.pool):
                req = worker.request
                if req is not None and req.timeout_s and now - worker.started > req.timeout_s + self.grace_s:
                    yield from self._lost(worker, queue, f"did not finish within the episode's "
                                          f"{req.timeout_s:g} s limit + {self.grace_s:g} s grace (hung)")

    def _wait_s(self) -> float:
        now, wait = time.monotonic(), 1.0
        for worker in self.pool:
            if worker.request is not None and worker.request.timeout_s:
                wait = min(wait, worker.started + worker.request.timeout_s + self.grace_s - now)
        return max(0.0, wait)

    def _read(self, worker: _Worker, queue: collections.deque[EpisodeRequest]) -> Iterator[Trajectory]:
        try:
            data = os.read(worker.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            yield from self._lost(worker, queue, None)
            return
        try:
            messages = worker.reader.feed(data)
        except ValueError as exc:
            yield from self._lost(worker, queue, f"sent a malformed frame ({exc})")
            return
        for message in messages:
            if message.get("op") == "ready":
                worker.ready, self.deaths_at_start = True, 0
            elif message.get("op") == "result" and worker.request is not None:
                worker.request = None
                yield trajectory_from_data(message["trajectory"])

    def _lost(self, worker: _Worker, queue: collections.deque[EpisodeRequest],
              why: str | None) -> Iterator[Trajectory]:
        request, pid, was_ready = worker.request, worker.proc.pid, worker.ready
        code = self._retire(worker)
        reason = why or describe_exit(code)
        if not was_ready:
            self.deaths_at_start += 1
            if self.deaths_at_start > 2 * self.workers:
                raise errors.InfraError(
                    f"Pool workers keep dying at start-up (last: pid {pid} {reason}). Check that "
                    f"the plugins {self.config['plugins']} import, and the workers' log.")
        if request is None:
            return
        record, retry = lost_attempt(
            request, f"worker pid {pid} {reason} during episode {request.key!r} "
                     f"(attempt {request.attempt + 1} of {self.retries + 1})", self.retries, f"pool:{pid}")
        if retry is not None:
            queue.appendleft(retry)
        yield record

    def ping(self, n: int = 1000) -> float:
        """Mean round-trip time (seconds) of an empty message to one worker."""
        worker = self.pool[0] if self.pool else self._spawn()
        self.selector.unregister(worker.stdout)
        os.set_blocking(worker.stdout.fileno(), True)
        try:
            t0 = time.perf_counter()
            for _ in range(n + 1):
                if _ == 1:
                    t0 = time.perf_counter()
                worker.send({"op": "ping"})
                while True:
                    ops = [m.get("op") for m in worker.reader.feed(worker.stdout.read1(1 << 16))]  # type: ignore[attr-defined]
                    worker.ready = worker.ready or "ready" in ops
                    if "pong" in ops:
                        break
            return (time.perf_counter() - t0) / n
        finally:
            os.set_blocking(worker.stdout.fileno(), False)
            self.selector.register(worker.stdout, selectors.EVENT_READ, worker)

    def close(self) -> None:
        for worker in list(self.pool):
            try:
                worker.send({"op": "exit"})
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for worker in list(self.pool):
            try:
                worker.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self._retire(worker)
        self.selector.close()
        self.selector = selectors.DefaultSelector()
        if self.log is not None:
            self.log.close()
            self.log = None

    def __enter__(self) -> PoolExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
