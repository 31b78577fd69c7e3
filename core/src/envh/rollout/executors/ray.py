"""The Ray executor: warm episode actors on a Ray cluster (a local one by default).

Semantics match the pool: each actor is a worker process running the same
``run_episode`` with warm envs and policies, a memory limit and a per-episode CPU
budget (``memory_mb``, 16 GiB by default, is how far an actor's private writable memory,
``RLIMIT_DATA``, may grow from what the Ray worker already holds); a dead actor (crash, node loss) or one busy
past the time limit plus ``grace_s`` is killed and replaced, its episode recorded as an
``infra_error`` attempt with Ray's account of the death, and retried up to ``retries``
times. When envh starts the local cluster it does so with a scrubbed environment, so no
worker inherits secrets; the variable a policy names (``api_key_env``) reaches only its
actors, through their runtime env; on a cluster you connect to (``address``) the actors
also drop secret variables at start (best effort: the cluster's own environment is the
operator's). Under a root driver, actors give up every capability (``isolation``), so
episode code cannot read the driver's ``/proc/<pid>/environ``. The local cluster's
processes share the driver's fate (Ray's own parent-death signal): ``kill -9`` of the
driver leaves none behind, though Ray's two agents take about a minute to go (they first
report their raylet's death to the GCS, gone too, with a 60 s timeout). Ray is imported
only when this executor is built.
"""

from __future__ import annotations

import collections
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from ... import errors
from ..trajectory import EpisodeRequest, Trajectory, request_to_data, trajectory_from_data
from .base import (
    WorkerConfig,
    _carries_code,
    _untrusted,
    as_played,
    bridge_host_access,
    declared_data,
    default_workers,
    is_secret,
    lost_attempt,
    policy_env_names,
    prepare_work_dir,
    scrub_environ,
)
from .isolation import NOBODY


class EpisodeActor:
    """The body of a Ray actor: one warm worker (wrapped with ``ray.remote`` lazily)."""

    def __init__(self, config: dict[str, Any], pass_env: list[str] | bool, isolation: str = "none") -> None:
        import signal

        from .. import runner
        from ..warm import Warm
        from .base import make_worker_registry

        if pass_env is not True:
            for name in [n for n in os.environ if is_secret(n) and n not in set(pass_env)]:  # type: ignore[arg-type]
                del os.environ[name]
        self.config = WorkerConfig(**config)
        apply_memory_budget(self.config.memory_mb)
        from .worker import undumpable

        undumpable()
        if isolation != "none":
            drop_capabilities()

        def over_cpu(_signum: int, _frame: Any) -> None:
            raise runner._Deadline(f"the episode used its CPU budget of {self.config.cpu_s:g} s")

        signal.signal(signal.SIGXCPU, over_cpu)
        self.warm = Warm(make_worker_registry(self.config))

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        from .. import runner
        from ..trajectory import request_from_data, trajectory_to_data
        from .base import arm_cpu_budget

        req = request_from_data(request)
        try:
            arm_cpu_budget(self.config)
            return trajectory_to_data(runner.run_episode(req, self.warm))
        except BaseException as exc:  # noqa: BLE001 - the actor outlives whatever the episode did
            self.warm.close()
            return trajectory_to_data(runner.infra_failure(
                req, f"the actor failed running the episode: {runner.describe(exc)}", final=True,
                worker=f"ray:{os.getpid()}", detail=runner.format_traceback(exc)))

    def check(self, policy: str, options: dict[str, Any], spec: dict[str, Any] | None = None,
              spec_id: str | None = None, trust: str = "untrusted",
              data: tuple[str, ...] = ()) -> dict[str, Any] | None:
        """Build ``policy`` and the env of ``spec`` (they stay warm); what failed, or ``None``."""
        from .worker import preflight

        return preflight(self.warm, policy, options, spec, spec_id, trust, tuple(data))

    def pid(self) -> int:
        return os.getpid()


def apply_memory_budget(memory_mb: int | None) -> None:
    """Let this actor's private writable memory (``RLIMIT_DATA``, as the pool's workers) grow by
    at most ``memory_mb`` from now (an absolute cap would count what Ray's worker already holds)."""
    if not memory_mb:
        return
    import resource

    size = 0
    try:
        for line in open("/proc/self/status", encoding="ascii"):  # noqa: SIM115
            if line.startswith("VmData:"):
                size = int(line.split()[1]) * 1024
    except OSError:
        pass
    limit = size + int(memory_mb) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def drop_capabilities() -> None:
    """Give up every capability but CAP_SETFCAP and the means to regain one (no_new_privs). Where it
    matters — an actor of a root driver — this keeps episode code from reading the
    driver's ``/proc/<pid>/environ`` or tracing other processes. Ray runs an actor's
    tasks on the thread that built it, whose capabilities these are."""
    import ctypes

    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_capbset_drop = 38, 24
    libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0)
    cap_setfcap = 31  # kept: the jail of untrusted code maps uid 0 with it (see isolation.wrap)
    for cap in range(64):
        if cap != cap_setfcap:
            libc.prctl(pr_capbset_drop, cap, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    data[0].effective = data[0].permitted = 1 << cap_setfcap
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed: cannot drop the actor's capabilities")


def start_watchdog() -> int:
    """A process that outlives this one to kill what it started: Ray's parent-death signal
    stops its raylet and GCS, but not every agent they spawn. The watchdog notes this
    process's descendants every second and kills them once this process is gone (the
    write end of its stdin, held here as a bare descriptor, closes only then)."""
    import sys

    read, write = os.pipe()
    pid = os.posix_spawn(sys.executable, [sys.executable, "-c", "from envh.rollout.executors.ray import watch; "
                                          "watch()", str(os.getpid())], dict(os.environ),
                         file_actions=[(os.POSIX_SPAWN_DUP2, read, 0), (os.POSIX_SPAWN_CLOSE, write)], setsid=True)
    os.close(read)
    _WATCHDOG_FDS.append(write)  # kept open for the life of this process
    return pid


_WATCHDOG_FDS: list[int] = []


def _process_table() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, start time) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry)] = (int(fields[1]), fields[19])
    return table


def watch() -> None:
    """The watchdog's body (``start_watchdog``): the parent's pid is argv[1]; its end of
    our stdin closes when it dies."""
    import select
    import signal
    import sys

    parent, me = int(sys.argv[1]), os.getpid()
    seen: dict[int, str] = {}
    while True:
        table = _process_table()
        todo = [parent]
        while todo:
            pid = todo.pop()
            for child, (ppid, started) in table.items():
                if ppid == pid and child != me and child not in seen:
                    seen[child] = started
                    todo.append(child)
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready and not os.read(sys.stdin.fileno(), 1024):
            break
    time.sleep(2.0)  # let Ray's own shutdown go first
    table = _process_table()
    for pid, started in seen.items():
        if table.get(pid, (0, ""))[1] == started:  # the same process, not a reused pid
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _ray_session_dir(ray: Any) -> str:
    """This cluster's session directory (sockets, logs), which actors write; Ray's temporary
    root when it is not known here."""
    try:
        return str(ray._private.worker._global_node.get_session_dir_path())
    except Exception:  # noqa: BLE001 - a cluster started elsewhere
        return os.environ.get("RAY_TMPDIR") or "/tmp/ray"


def _ray_token_path() -> str | None:
    """Ray's token file when the cluster authenticates its processes with one: it lives in
    root's home, which fenced actors do not see (they get it alone, read-only)."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return os.path.realpath(path) if os.path.isfile(path) else None


@contextmanager
def _scrubbed_environ(pass_env: list[str] | bool, local: bool = False) -> Iterator[None]:
    saved = dict(os.environ)
    clean = scrub_environ(saved, pass_env)
    try:
        for name in set(saved) - set(clean):
            del os.environ[name]
        if local:  # the cluster's own processes agree it is a one-node, loopback cluster
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class RayExecutor:
    """Run episodes on ``workers`` Ray actors. Options as for the pool, plus ``address``
    (an existing cluster; default: start a local one) and ``cpus_per_worker``."""

    def __init__(self, workers: int | None = None, *, address: str | None = None, timeout_s: float | None = None,
                 grace_s: float = 5.0, retries: int = 2, memory_mb: int | None = 16384, cpu_s: float | None = None,
                 pass_env: Iterable[str] | bool = (), plugins: Iterable[str] = (), entry_points: bool = True,
                 cpus_per_worker: float = 1.0, isolation: str | None = "auto", host_access: Iterable[str] = (),
                 **_ignored: Any) -> None:
        import ray

        self.ray = ray
        if (workers is not None and int(workers) < 0) or (memory_mb is not None and memory_mb < 0):
            raise ValueError(f"workers and memory_mb cannot be negative (got {workers}, {memory_mb})")
        self.workers = int(workers or default_workers())
        self.timeout_s, self.grace_s, self.retries = timeout_s, grace_s, retries
        self.pass_env: list[str] | bool = pass_env if pass_env is True else list(pass_env or ())
        self.config = {"memory_mb": memory_mb, "cpu_s": cpu_s, "plugins": tuple(plugins),
                       "entry_points": entry_points}
        self.watchdog: Any = None
        if not ray.is_initialized():
            constants = ray._private.ray_constants
            saved_cluster = constants.ENABLE_RAY_CLUSTER
            if address is None:  # a local cluster stays on loopback (Ray resolves 127.0.0.1 to the node's
                constants.ENABLE_RAY_CLUSTER = False  # outward address unless it thinks it is alone)
            with _scrubbed_environ(self.pass_env, local=address is None):
                try:
                    ray.init(address=address, include_dashboard=False, log_to_driver=False,
                             configure_logging=False,
                             num_cpus=None if address else max(os.cpu_count() or 1,
                                                               int(self.workers * cpus_per_worker)))
                finally:
                    constants.ENABLE_RAY_CLUSTER = saved_cluster
            if address is None:
                self.watchdog = start_watchdog()
        if isolation not in (None, "none", "auto", "user", "namespace"):
            raise errors.EnvhError(f"Unknown isolation {isolation!r}. Choose one of: auto, none, namespace, user")
        self.isolation = "none" if isolation in (None, "none") or os.geteuid() != 0 else \
            "namespace" if isolation == "namespace" else "user"
        self.actor_class = ray.remote(num_cpus=cpus_per_worker, max_restarts=0)(EpisodeActor)
        self.actors: list[Any] = []
        self.env_vars: dict[str, str] = {}
        self.host_access: frozenset[str] = frozenset(host_access)
        self.data: frozenset[tuple[str, bool, bool]] = frozenset()
        self.work_dir = prepare_work_dir(tempfile.mkdtemp(prefix="envh-ray-"),
                                         (NOBODY, NOBODY) if self.isolation == "user" else None) \
            if self.isolation != "none" else None

    def _spawn(self) -> Any:
        cls = self.actor_class
        runtime_env: dict[str, Any] = {}
        env_vars = dict(self.env_vars)  # the secret the policy names, for these actors only
        if self.isolation != "none" and shutil.which("setpriv") and shutil.which("unshare"):
            from . import isolation as fence

            # capabilities are per thread: dropped only on the task thread, Ray's other
            # threads in the actor's process keep them (its GC thread runs a replaceable
            # function on request), so the whole process starts without any but CAP_SETFCAP,
            # which the jail of untrusted code needs to map uid 0 (see isolation.wrap); in a
            # mount namespace of its own (no PID namespace: Ray watches the actor's pid) where
            # root's homes, /tmp and /var/tmp are empty stand-ins, everything read-only but its
            # directory, Ray's session and the data its bridges and policies declare
            assert self.work_dir is not None
            prepare_work_dir(self.work_dir, (NOBODY, NOBODY) if self.isolation == "user" else None)  # after close()
            data = set(self.data)
            token = _ray_token_path()
            if token:  # the cluster's own credential (an actor is inside the cluster already)
                data.add((token, False, True))
                env_vars["RAY_AUTH_TOKEN_PATH"] = token
            plan = fence.fence_plan(self.isolation, self.work_dir, self.host_access, data,
                                    keep=[_ray_session_dir(self.ray)], scratch=("/tmp", "/var/tmp"))
            plan["cwd"] = self.work_dir
            if self.isolation == "user":  # nobody: Ray's session and token come idmapped, as nobody's own
                group = fence._docker_group() if "docker" in self.host_access else None
                drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                        "--clear-groups" if group is None else f"--groups={group}", "--no-new-privs",
                        "--inh-caps=-all", "--bounding-set=-all"]
            else:
                drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all,+setfcap"]
            runtime_env["py_executable"] = " ".join(shlex.quote(a) for a in (
                "unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I", "-S", "-c",
                fence.SETUP, json.dumps(plan), *drop, "--", sys.executable))
            env_vars.update(HOME=self.work_dir, TMPDIR=self.work_dir)
        if env_vars:
            runtime_env["env_vars"] = env_vars
        if runtime_env:
            cls = cls.options(runtime_env=runtime_env)
        keep: list[str] | bool = True if isinstance(self.pass_env, bool) else [*self.pass_env, *self.env_vars]
        actor = cls.remote(self.config, keep, self.isolation)
        self.actors.append(actor)
        return actor

    def _ensure_env(self, requests: Iterable[EpisodeRequest]) -> None:
        requests = list(requests)
        if os.geteuid() == 0 and any(_untrusted(r) and _carries_code(r.spec) for r in requests):
            # an actor is a Ray worker: its code may submit tasks with a runtime_env of its own
            # (another py_executable), which the raylet starts as root, outside any fence
            raise errors.EnvhError(
                "Ray cannot fence untrusted specs under a root driver: code in an actor can start Ray workers "
                "of its own choosing, which run as root outside the fence. Use the pool executor for untrusted "
                "work (its workers are not cluster members), or run Ray as an unprivileged user.")
        names = policy_env_names(requests)
        env_vars = {n: os.environ[n] for n in sorted(names) if n in os.environ}
        data_env: dict[str, str] = {}
        access, data = self.host_access, self.data
        if self.isolation != "none":
            from . import isolation as fence

            access = self.host_access | bridge_host_access(requests)
            if "docker" not in access and fence.docker_tcp_endpoints():
                raise errors.EnvhError(
                    f"A container daemon is reachable over TCP here ({'; '.join(fence.docker_tcp_endpoints())}): "
                    "any actor could connect and be root on the host. Serve it on its unix socket only, or grant "
                    "it knowingly (host_access=['docker'], or a bridge that declares it).")
            found, data_env = declared_data(requests, None, self.work_dir)
            data = self.data | found
        env_vars.update(data_env)
        if env_vars != self.env_vars or access != self.host_access or data != self.data:
            self.env_vars, self.host_access, self.data = env_vars, access, data
            for actor in list(self.actors):
                self._retire(actor)

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
        queue = collections.deque(as_played(r, self.timeout_s) for r in requests)
        self._ensure_env(queue)
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
                    trajectory = trajectory_from_data(ray.get(ref))
                except ray.exceptions.RayError as exc:
                    self._retire(actor)
                    detail = str(exc)
                    last = detail.strip().splitlines()[-1][:300] if detail.strip() else ""
                    yield self._lost(request, f"Ray actor failed ({type(exc).__name__}: {last})", queue, detail)
                    continue
                except Exception as exc:  # noqa: BLE001 - an actor's answer is untrusted data
                    self._retire(actor)
                    yield self._lost(request, f"Ray actor sent an unreadable trajectory ({type(exc).__name__})",
                                     queue, str(exc))
                    continue
                # the driver's request, not the actor's word, says which episode this is
                yield attrs.evolve(trajectory, key=request.key, run_id=request.run_id, attempt=request.attempt,
                                   final=True, spec_id=request.spec_id, task=request.task, seed=request.seed,
                                   policy=request.policy)
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

    def _lost(self, request: EpisodeRequest, message: str, queue: collections.deque[EpisodeRequest],
              detail: str | None = None) -> Trajectory:
        record, retry = lost_attempt(
            request, f"{message} during episode {request.key!r} (attempt {request.attempt + 1} of "
                     f"{self.retries + 1})", self.retries, "ray", detail=detail)
        if retry is not None:
            queue.appendleft(retry)
        return record

    def check(self, policy: str, options: dict[str, Any], spec: dict[str, Any] | None = None,
              spec_id: str | None = None, timeout_s: float = 300.0, trust: str = "untrusted",
              data: tuple[str, ...] = ()) -> None:
        """Build ``policy`` (and the env of ``spec``) on an actor, where they will run (they
        stay warm there; ``data``: the host paths granted, as the run's requests carry them);
        raise ``PolicyError`` / ``EnvError`` with the cause."""
        from ...hostpaths import grants

        self._ensure_env([EpisodeRequest(key="check", spec={}, spec_id="", policy=policy,
                                         policy_options=options)])
        actor = self.actors[0] if self.actors else self._spawn()
        try:
            problem = self.ray.get(actor.check.remote(policy, options, spec, spec_id, trust, grants(data)),
                                   timeout=timeout_s)
        except self.ray.exceptions.RayError as exc:
            self._retire(actor)
            raise errors.InfraError(f"A Ray actor failed while building policy {policy!r}: "
                                    f"{type(exc).__name__}: {str(exc)[:2000]}") from exc
        if problem:
            from .worker import preflight_error

            raise preflight_error(policy, problem, "on a Ray actor")

    def close(self) -> None:
        for actor in list(self.actors):
            self._retire(actor)
        if self.work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
