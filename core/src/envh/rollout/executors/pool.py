"""The process-pool executor (the default): warm worker processes, each running one
episode at a time, so N workers really play N episodes at once (LLM-bound episodes
overlap their waits; CPU-bound ones use N cores).

Isolation matches one-fresh-process-per-episode where it matters: each worker is a
separate interpreter started with a scrubbed environment (no ``*_API_KEY``, ``*_TOKEN``
or cloud credentials, except the variable its policy names — ``api_key_env`` — and
``pass_env``), an address-space limit and a per-episode CPU budget. When envh runs as
root the workers run as ``nobody`` in their own directory (``work_dir``), so even code
that escapes every sandbox cannot read the parent's ``/proc/<pid>/environ`` or root's
files. What a worker keeps between episodes is only its warm env and policy, which
``reset`` in place. A worker that crashes, or stays busy past the episode's time limit
plus ``grace_s``, is killed and replaced; its episode is recorded as an ``infra_error``
attempt — with the worker's real exit status and the last thing it wrote (its
traceback) — and retried up to ``retries`` times.
"""

from __future__ import annotations

import collections
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import attrs

from ... import errors
from ..trajectory import EpisodeRequest, Trajectory, request_to_data, trajectory_from_data
from . import isolation as fence
from .base import (
    as_played,
    bridge_host_access,
    declared_data,
    default_workers,
    lost_attempt,
    policy_env_names,
    prepare_work_dir,
    scrub_environ,
)
from .worker import FrameReader, encode, preflight_error

HOST = socket.gethostname()
TAIL = 64 * 1024  # bytes of each worker's stderr kept for the report of its death
LOG_LIMIT = 256 * 1024 * 1024  # bytes of worker output a log file takes


class _Worker:
    """One worker process, the episode it is playing, and the tail of its stderr."""

    def __init__(self, cmd: list[str], env: dict[str, str], config: dict[str, Any], cwd: str) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, close_fds=True, start_new_session=True, cwd=cwd)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.stdin, self.stdout, self.stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        os.set_blocking(self.stdout.fileno(), False)
        os.set_blocking(self.stderr.fileno(), False)
        self.reader = FrameReader()
        self.tail = bytearray()
        self.request: EpisodeRequest | None = None
        self.started = 0.0
        self.ready = False
        self.env_names = frozenset(env)
        self._host_pid: int | None = None
        self.send({"op": "config", **config})

    @property
    def host_pid(self) -> int:
        """The worker's Python process as seen from here (not its namespace's pid)."""
        if self._host_pid is not None:
            return self._host_pid
        pid = _leaf(self.proc.pid)
        if self.ready:  # its Python is running: the leaf is final
            self._host_pid = pid
        return pid

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(encode(message))
        self.stdin.flush()

    def last_words(self, limit: int = 8000) -> str:
        return bytes(self.tail[-limit:]).decode("utf-8", errors="replace").strip()

    def kill(self, wait_s: float = 0.0) -> int | None:
        """Stop the process (after ``wait_s`` for it to exit by itself) and return its status."""
        if wait_s and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        try:  # and what it started (its own session: the worker leads the group)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        code = self.proc.wait()
        for stream in (self.stdin, self.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass
        return code


def _leaf(pid: int) -> int:
    """The innermost descendant of ``pid`` (the worker under ``unshare`` and its shell)."""
    for _ in range(4):
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return pid
        if not children:
            return pid
        pid = int(children[0])
    return pid


class PoolExecutor:
    """Run episodes in ``workers`` warm processes. Options: ``timeout_s`` (per episode,
    when the request sets none), ``grace_s``, ``retries``, ``memory_mb``
    (private writable memory, ``RLIMIT_DATA``, per worker; 16 GiB unless set; 0 lifts it), ``cpu_s``, ``pass_env`` (names, or True
    for everything), ``isolation`` (``auto``, ``none``, ``namespace``, ``user``: see
    ``executors.isolation``), ``work_dir`` (the workers' directory; default a fresh
    temporary one),
    ``plugins`` / ``entry_points`` (what the workers load), ``log_path`` (workers' stderr)."""

    def __init__(self, workers: int | None = None, *, timeout_s: float | None = None, grace_s: float = 5.0,
                 retries: int = 2, memory_mb: int | None = 16384, cpu_s: float | None = None,
                 pass_env: Iterable[str] | bool = (), plugins: Iterable[str] = (), entry_points: bool = True,
                 log_path: str | None = None, python: str | None = None, isolation: str | None = "auto",
                 work_dir: str | None = None, registry: Any = None, host_access: Iterable[str] = (),
                 **_ignored: Any) -> None:
        if (workers is not None and int(workers) < 0) or (memory_mb is not None and memory_mb < 0):
            raise ValueError(f"workers and memory_mb cannot be negative (got {workers}, {memory_mb})")
        self.workers = int(workers or default_workers())
        self.timeout_s, self.grace_s, self.retries = timeout_s, grace_s, retries
        self.config = {"memory_mb": memory_mb, "cpu_s": cpu_s, "plugins": list(plugins),
                       "entry_points": entry_points}
        self.pass_env = pass_env if pass_env is True else set(pass_env or ())
        self.isolation = isolation_level = fence.resolve(isolation)
        self.owner = (fence.NOBODY, fence.NOBODY) if isolation_level == "user" else None
        self.registry = registry
        self._own_dir = work_dir is None
        self.work_dir = prepare_work_dir(work_dir or tempfile.mkdtemp(prefix="envh-pool-"), self.owner)
        self.data: frozenset[tuple[str, bool, bool]] = frozenset()  # what bridges and policies declared they read
        self.data_env: dict[str, str] = {}
        self.policy_names: set[str] = set()
        self.env = self._environ(set())
        self.argv = [python or sys.executable, "-m", "envh.rollout.executors.worker"]
        self.host_access = frozenset(host_access)
        self.cmd = fence.wrap(self.argv, isolation_level, self.work_dir, self.host_access, self.data)
        self.log: IO[bytes] | None = None
        self.logged = 0
        if log_path:
            self.open_log(log_path)
        self.pool: list[_Worker] = []
        self.selector = selectors.DefaultSelector()
        self.deaths_at_start = 0

    def _environ(self, names: set[str]) -> dict[str, str]:
        passed = True if self.pass_env is True else sorted(set(self.pass_env) | names)
        env = scrub_environ(os.environ, passed)
        if self.isolation != "none":  # the parent's home is an empty stand-in there; the work dir is theirs
            env.update(HOME=self.work_dir, TMPDIR=self.work_dir)
        env.update(self.data_env)  # ``NAME=default`` declarations: where the data is, whatever HOME says
        return env

    def open_log(self, path: str) -> None:
        """Append the workers' stderr to ``path`` from now on."""
        if self.log is not None:
            self.log.close()
        self.log = open(path, "ab")  # noqa: SIM115 - lives as long as the pool

    # -- workers -------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        worker = _Worker(self.cmd, self.env, self.config, self.work_dir)
        self.selector.register(worker.stdout, selectors.EVENT_READ, (worker, "out"))
        self.selector.register(worker.stderr, selectors.EVENT_READ, (worker, "err"))
        self.pool.append(worker)
        return worker

    def _retire(self, worker: _Worker, wait_s: float = 0.0) -> int | None:
        for stream in (worker.stdout, worker.stderr):
            try:
                self.selector.unregister(stream)
            except (KeyError, ValueError):
                pass
        if worker in self.pool:
            self.pool.remove(worker)
        if wait_s:  # let it finish dying by itself, keeping what it writes on the way
            deadline = time.monotonic() + wait_s
            while worker.proc.poll() is None and time.monotonic() < deadline:
                self._drain_err(worker)
                time.sleep(0.01)
        code = worker.kill()
        self._drain_err(worker)
        return code

    def _drain_err(self, worker: _Worker) -> bool:
        """Read what the worker wrote to stderr; False at its end."""
        try:
            data = os.read(worker.stderr.fileno(), 1 << 16)
        except BlockingIOError:
            return True
        except (OSError, ValueError):
            return False
        if not data:
            return False
        worker.tail += data
        del worker.tail[:-TAIL]
        if self.log is not None and self.logged < LOG_LIMIT:
            self.logged += len(data)
            self.log.write(data if self.logged < LOG_LIMIT else data + b"\n[envh: the workers' log reached its "
                           b"size limit; later output is not kept]\n")
            self.log.flush()
        return True

    def pids(self) -> list[int]:
        """The workers' Python processes (inside their namespace when isolated)."""
        return [w.host_pid for w in self.pool]

    def busy(self) -> dict[str, int]:
        """Episode key → the pid of the worker process playing it."""
        return {w.request.key: w.host_pid for w in self.pool if w.request is not None}

    # -- running -------------------------------------------------------------------------
    def run(self, requests: Iterable[EpisodeRequest]) -> Iterator[Trajectory]:
        queue = collections.deque(as_played(r, self.timeout_s) for r in requests)
        self._ensure_env(queue)
        self._ensure_access(queue)
        try:
            yield from self._loop(queue)
        finally:  # the caller stopped early: episodes still playing must not leak into the next run
            for worker in [w for w in self.pool if w.request is not None]:
                self._retire(worker)

    def _ensure_env(self, requests: Iterable[EpisodeRequest]) -> None:
        """Give the workers the variables these requests' policies name (respawning idle ones)."""
        self.policy_names = policy_env_names(requests, self.registry)
        env = self._environ(self.policy_names)
        if env != self.env:
            self.env = env
            for worker in [w for w in self.pool if w.request is None]:
                self._retire(worker)

    def _ensure_access(self, requests: Iterable[EpisodeRequest]) -> None:
        """Let the workers reach what these requests' bridges declare (``host_access``),
        respawning idle ones; what no bridge declared stays out of reach."""
        requests = list(requests)
        needed = bridge_host_access(requests, self.registry)
        access = needed | self.host_access
        if self.isolation != "none" and "docker" not in access and "network" in access:
            tcp = fence.docker_tcp_endpoints()
            if tcp:  # no mount hides a daemon on the network the workers share
                raise errors.EnvhError(
                    f"A container daemon is reachable over TCP here ({'; '.join(tcp)}): any pool worker could "
                    "connect and be root on the host, whatever its isolation. Serve it on its unix socket only, "
                    "or grant it knowingly (host_access=['docker'] for the pool, or a bridge that declares "
                    "it), or run with isolation='none'.")
        data, data_env = (declared_data(requests, self.registry, self.work_dir) if self.isolation != "none"
                          else (frozenset(), {}))
        if not needed <= self.host_access or not data <= self.data or \
                any(self.data_env.get(k) != v for k, v in data_env.items()):
            self.host_access |= needed
            self.data |= data
            self.data_env.update(data_env)
            self.env = self._environ(self.policy_names)
            self.cmd = fence.wrap(self.argv, self.isolation, self.work_dir, self.host_access, self.data)
            for worker in [w for w in self.pool if w.request is None]:
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
                worker, stream = key.data
                if worker not in self.pool:
                    continue
                if stream == "err":
                    if not self._drain_err(worker):
                        self.selector.unregister(worker.stderr)
                    continue
                yield from self._read(worker, queue)
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

    def _messages(self, worker: _Worker) -> list[dict[str, Any]] | None:
        """Frames the worker sent (``None`` at its end of output); raises ValueError on garbage."""
        try:
            data = os.read(worker.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return []
        except OSError:
            data = b""
        if not data:
            return None
        try:
            messages = worker.reader.feed(data)
        except ValueError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. JSON nested past the recursion limit
            raise ValueError(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        for message in messages:
            if not isinstance(message, dict):
                raise ValueError(f"a frame holds {type(message).__name__}, not an object")
        return messages

    def _read(self, worker: _Worker, queue: collections.deque[EpisodeRequest]) -> Iterator[Trajectory]:
        try:
            messages = self._messages(worker)
        except ValueError as exc:
            yield from self._lost(worker, queue, f"sent a malformed frame ({exc})")
            return
        if messages is None:
            yield from self._lost(worker, queue, None)
            return
        for message in messages:
            if message.get("op") == "ready":
                worker.ready, self.deaths_at_start = True, 0
            elif message.get("op") == "result" and worker.request is not None:
                request = worker.request
                try:
                    trajectory = trajectory_from_data(message["trajectory"])
                except Exception as exc:  # noqa: BLE001 - a worker's answer is untrusted data
                    yield from self._lost(worker, queue, f"sent an unreadable trajectory "
                                          f"({type(exc).__name__}: {str(exc)[:300]})")
                    return
                worker.request = None
                # the parent's request, not the worker's word, says which episode this is
                yield attrs.evolve(trajectory, key=request.key, run_id=request.run_id, attempt=request.attempt,
                                   final=True, spec_id=request.spec_id, task=request.task, seed=request.seed,
                                   policy=request.policy, worker=f"{HOST}:{worker.host_pid}")

    def _lost(self, worker: _Worker, queue: collections.deque[EpisodeRequest],
              why: str | None) -> Iterator[Trajectory]:
        request, pid, was_ready = worker.request, worker.host_pid, worker.ready
        code = self._retire(worker, wait_s=0.0 if why else 3.0)
        reason = why or fence.describe_status(code, self.isolation)
        words = worker.last_words()
        last_line = words.splitlines()[-1][:300] if words else ""
        if not was_ready:
            self.deaths_at_start += 1
            if self.deaths_at_start > 2 * self.workers:
                raise errors.InfraError(
                    f"Pool workers keep dying at start-up (last: pid {pid} {reason}"
                    f"{'; it wrote: ' + last_line if last_line else ''}). Check that the plugins "
                    f"{self.config['plugins']} import; the workers' output:\n{words[-3000:]}")
        if request is None:
            return
        record, retry = lost_attempt(
            request, f"worker pid {pid} {reason} during episode {request.key!r} (attempt "
                     f"{request.attempt + 1} of {self.retries + 1})"
                     f"{'; its last output: ' + last_line if last_line else ''}",
            self.retries, f"pool:{pid}", detail=words or None)
        if retry is not None:
            queue.appendleft(retry)
        yield record

    # -- preflight and diagnostics ---------------------------------------------------------
    def check(self, policy: str, options: dict[str, Any], spec: dict[str, Any] | None = None,
              spec_id: str | None = None, timeout_s: float = 300.0, trust: str = "untrusted",
              data: tuple[str, ...] = ()) -> None:
        """Build ``policy`` (and the env of ``spec``) in a worker, where they will run (they
        stay warm there; ``data``: the host paths granted, as the run's requests carry them);
        raise ``PolicyError`` / ``EnvError`` with the cause when one cannot be built."""
        probe = as_played(EpisodeRequest(key="check", spec=spec or {}, spec_id=spec_id or "", policy=policy,
                                         policy_options=options, trust=trust, data=data), None)
        self._ensure_env([probe])
        self._ensure_access([probe])
        worker = next((w for w in self.pool if w.request is None), None) or self._spawn()
        worker.send({"op": "check", "policy": policy, "options": options, "spec": spec, "spec_id": spec_id,
                     "trust": trust, "data": list(probe.data)})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready = selectors.DefaultSelector()
            ready.register(worker.stdout, selectors.EVENT_READ)
            ready.register(worker.stderr, selectors.EVENT_READ)
            events = ready.select(timeout=1.0)
            ready.close()
            if any(key.fileobj is worker.stderr for key, _ in events):
                self._drain_err(worker)
            try:
                messages = self._messages(worker)
            except ValueError as exc:
                self._retire(worker)
                raise errors.InfraError(f"A pool worker sent a malformed frame while building the policy: {exc}") \
                    from exc
            if messages is None:
                code = self._retire(worker, wait_s=3.0)
                raise errors.InfraError(
                    f"A pool worker {fence.describe_status(code, self.isolation)} while building policy "
                    f"{policy!r}. Its output:\n"
                    f"{worker.last_words(3000)}")
            for message in messages:
                if message.get("op") == "ready":
                    worker.ready = True
                elif message.get("op") == "checked":
                    if message.get("error"):
                        raise preflight_error(policy, message, "in a worker")
                    return
        self._retire(worker)
        raise errors.InfraError(f"Building policy {policy!r} in a worker took over {timeout_s:g} s.")

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
            self.selector.register(worker.stdout, selectors.EVENT_READ, (worker, "out"))

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
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> PoolExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
