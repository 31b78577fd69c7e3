"""A rollout run: which episodes to play (the plan), playing them into a store, resuming,
and summarising (success rate with a Wilson 95% interval, steps, error classes).

A run lives in one directory: ``trajectories.sqlite`` holds its manifest and every
trajectory. Episode keys are ``TASK#K`` (K-th rollout of the task, seed = ``seed + K``),
so a resumed run skips exactly the keys already stored and plays the rest.
"""

from __future__ import annotations

import json
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
from .runner import recordable
from .store import TrajectoryStore, build_manifest
from .trajectory import ERROR_CLASSES, EpisodeRequest, Trajectory
from .warm import package_versions


def select_tasks(spec: Mapping[str, Any], registry: Registry, *, task_ids: Iterable[str] = (),
                 n_tasks: int | None = None, split: str | None = None,
                 trust: str = "untrusted", data: Iterable[str] = ()) -> list[TaskRef | None]:
    """Tasks named by id (``ID`` or ``SPLIT/ID``), the first N (of a split), or a whole split;
    ``[None]`` (the bridge's default task) when nothing is asked."""
    ids = list(task_ids)
    if not ids and n_tasks is None and split is None:
        return [None]
    env = make(dict(spec), registry=registry, trust=trust, data=data)
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
               registry: Registry | None = None, training: bool = False,
               trust: str = "untrusted", data: Iterable[str] = ()) -> list[EpisodeRequest]:
    """One request per (task, rollout index). The policy name, the options (JSON data) and
    the limits are checked here, before anything is played or written; a spec that adapts
    its tasks (a layer of a ``training_only`` kind) only for a ``training`` run. ``trust`` is
    the tier the spec's code runs in (``envh.make``): the jail unless the caller says ``trusted``;
    ``data`` the host paths the spec may name besides ``envh.hostpaths.grants()``."""
    from ..hostpaths import grants, refuse_host_paths
    from .warm import parse_policy_spec

    reg = registry or get_registry()
    reg.policy(parse_policy_spec(policy)[0])  # an unknown name lists the installed ones
    options = check_options(policy_options or {})
    for name, value, low in (("k", k, 1), ("max_steps", max_steps, 1)):
        if not isinstance(value, int) or value < low:
            raise errors.EnvhError(f"{name} must be an integer ≥ {low}, not {value!r}")
    if trust not in ("trusted", "untrusted"):
        raise errors.EnvhError(f"trust must be 'trusted' or 'untrusted', not {trust!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise errors.EnvhError(f"The episode time limit must be positive, not {timeout_s!r}")
    parsed = parse_spec(spec_source, reg)
    spec_data, sid = spec_to_data(parsed, reg), spec_id(parsed, reg)
    if not training:  # an evaluation's task set stays fixed
        refuse_evaluation(spec_data, reg)
    granted = grants(data)
    refuse_host_paths(spec_data, reg, trust, granted)
    return [EpisodeRequest(key=f"{task if task is not None else 'default'}#{r}", spec=spec_data, spec_id=sid,
                           task=task, seed=seed + r, policy=policy, policy_options=dict(options),
                           run_id=run_id, max_steps=max_steps, timeout_s=timeout_s, trust=trust, data=granted)
            for task in tasks for r in range(k)]


def training_only_layers(spec: Any, registry: Registry | None = None) -> list[tuple[str, str]]:
    """``(where, kind)`` of every layer in spec data (``spec_to_data``'s form) whose kind is
    ``training_only``, chain legs and other nested specs included, in spec order."""
    kinds = (registry or get_registry()).component_kinds()
    found: list[tuple[str, str]] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, Mapping):
            if isinstance(node.get("layers"), (list, tuple)):
                for i, layer in enumerate(node["layers"]):
                    kind = kinds.get(str(layer.get("kind"))) if isinstance(layer, Mapping) else None
                    if kind is not None and kind.training_only:
                        found.append((f"{where}.layers[{i}]", kind.name))
                    walk(layer, f"{where}.layers[{i}]")
            else:
                for key, value in node.items():
                    walk(value, f"{where}.{key}")
        elif isinstance(node, (list, tuple)):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(spec, "$")
    return found


def refuse_evaluation(spec: Any, registry: Registry | None = None) -> None:
    """The runner's guard for a run not declared as training: spec data holding a layer of
    a ``training_only`` kind (which would adapt the tasks a fixed evaluation set is scored
    on) raises ``CurriculumEvaluationError`` naming where."""
    by_kind: dict[str, list[str]] = {}
    for where, kind in training_only_layers(spec, registry):
        by_kind.setdefault(kind, []).append(where)
    if by_kind:
        layers = " and ".join(f"a {kind} layer at {', '.join(wheres)}" for kind, wheres in by_kind.items())
        raise errors.CurriculumEvaluationError(
            f"The spec has {layers}, which adapts the task distribution (a training-only kind); an "
            "evaluation run must play the fixed task set. Evaluate on the spec without that layer, or pass "
            "--training if this run is training.")


OPERATIONAL = frozenset({"workers", "retries", "retry", "isolation", "max_endpoint_failures", "trust_code"})


def check_options(options: Mapping[str, Any], where: str = "policy option") -> dict[str, Any]:
    """``options`` as plain JSON data; a value JSON cannot hold (a function, an object) is an
    error naming it, not a ``repr`` string in some prompt."""
    out = {}
    for name, value in options.items():
        try:
            out[str(name)] = json.loads(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise errors.EnvhError(f"The {where} {name!r} is {type(value).__name__}, which is not JSON data "
                                   f"({exc}); options are JSON values (numbers, strings, lists, mappings).") from exc
    return out


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as ``path: old → new`` lines."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            if path in ("", "config") and key in OPERATIONAL:
                continue
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                out.append(f"{sub}: (absent) → {json.dumps(new[key], default=repr)[:200]}")
            elif key not in new:
                out.append(f"{sub}: {json.dumps(old[key], default=repr)[:200]} → (absent)")
            else:
                out += differences(old[key], new[key], sub)
        return out
    if old != new:
        return [f"{path}: {json.dumps(old, default=repr)[:200]} → {json.dumps(new, default=repr)[:200]}"]
    return []


def start_or_resume(store: TrajectoryStore, plan_config: dict[str, Any], requests: list[EpisodeRequest],
                    *, resume: bool, registry: Registry, retry_failed: bool = False,
                    versions: dict[str, str] | None = None) -> tuple[str, list[EpisodeRequest], dict[str, int]]:
    """The run id, the requests still to play, and the retry number of each re-played key.
    A new run writes its manifest; a resumed one must have been started with the same
    configuration (spec, policy and options, episodes, seeds, limits, executor, package
    versions), else nothing is played and the differences are listed."""
    check_resumable(store, plan_config, resume=resume, versions=versions or package_versions(registry))
    runs = store.runs()
    retries: dict[str, int] = {}
    if runs:
        run_id = runs[-1]
        done = store.completed_keys(run_id)
        if retry_failed:
            retries = {key: n + 1 for key, n in store.retryable_keys(run_id).items()}
            done -= set(retries)
    else:
        run_id, done = uuid.uuid4().hex[:12], set()
        store.create_run(run_id, build_manifest(
            run_id=run_id, config=plan_config, spec_ids=[r.spec_id for r in requests],
            seeds=[r.seed for r in requests], versions=versions or package_versions(registry)))
    todo = [r for r in requests if r.key not in done]
    return run_id, [_with_run(r, run_id) for r in todo], retries


def check_resumable(store: TrajectoryStore, plan_config: dict[str, Any], *, resume: bool,
                    versions: dict[str, str]) -> None:
    """Raise ``EnvhError`` unless this command may write into ``store``: a new run needs an
    empty store, a resumed one the same configuration."""
    runs = store.runs()
    if runs and not resume:
        raise errors.EnvhError(f"{store.path.parent} already holds run {runs[-1]}: pass --resume to finish "
                               "it, or choose another --out directory.")
    if not runs and resume:
        raise errors.EnvhError(f"{store.path.parent} holds no run to resume: run without --resume to start one.")
    if runs:
        manifest = store.manifest(runs[-1]) or {}
        diff = differences({"config": manifest.get("config", {}), "versions": manifest.get("versions", {})},
                           {"config": plan_config, "versions": versions})
        diff = [d.removeprefix("config.") for d in diff]
        if diff:
            raise errors.EnvhError(
                f"Cannot resume run {runs[-1]}: this command's configuration differs from the run's:\n  "
                + "\n  ".join(diff[:30]) + ("\n  ..." if len(diff) > 30 else "")
                + "\nRun the same command with --resume, or use another --out directory.")


def _with_run(request: EpisodeRequest, run_id: str) -> EpisodeRequest:
    import attrs

    return attrs.evolve(request, run_id=run_id)


class EndpointOutage(errors.PolicyError):
    """A run stopped after too many consecutive endpoint failures."""


def play(executor: Any, store: TrajectoryStore, requests: list[EpisodeRequest],
         on_result: Callable[[Trajectory], None] | None = None, *, retries: Mapping[str, int] | None = None,
         max_endpoint_failures: int | None = None) -> None:
    """Run every request, appending each trajectory to the store the moment it arrives.
    ``retries`` numbers the re-plays of keys (``--retry failed``); after
    ``max_endpoint_failures`` consecutive final trajectories that failed on the endpoint
    the run stops with ``EndpointOutage`` (the rest stays unplayed, ready for ``--resume``)."""
    import attrs

    retries = retries or {}
    streak: list[Trajectory] = []
    # an inline episode that cannot be stopped still leaves its timeout row in the store
    owned_abandon = hasattr(executor, "on_abandon") and executor.on_abandon is None
    if owned_abandon:
        executor.on_abandon = lambda t: _append_abandoned(store.path, t, retries or {})
    results = executor.run(requests)
    try:
        for trajectory in results:
            if trajectory.final and retries.get(trajectory.key):
                trajectory = attrs.evolve(trajectory, retry=retries[trajectory.key])
            try:
                store.append(trajectory)
            except (TypeError, ValueError, RecursionError) as exc:  # data a worker sent that JSON cannot hold
                trajectory = recordable(trajectory, exc)
                store.append(trajectory)
            if on_result is not None:
                on_result(trajectory)
            if not trajectory.final:
                continue
            endpoint = trajectory.retryable and trajectory.error_class == "policy_error"
            streak = [*streak, trajectory] if endpoint else []
            if max_endpoint_failures and len(streak) >= max_endpoint_failures:
                raise EndpointOutage(
                    f"Stopped after {len(streak)} consecutive episodes failed on the model endpoint (last: "
                    f"{streak[-1].error}). Once the endpoint is back, finish the run with the same command "
                    "plus --resume --retry failed.")
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()  # episodes still playing are stopped, not leaked
        if owned_abandon:
            executor.on_abandon = None


def _append_abandoned(path: Any, trajectory: Trajectory, retries: Mapping[str, int]) -> None:
    """Append the trajectory of an episode the executor gave up on (called from another
    thread while the one playing is stuck, so through a connection of its own)."""
    import attrs

    if trajectory.final and retries.get(trajectory.key):
        trajectory = attrs.evolve(trajectory, retry=retries[trajectory.key])
    with TrajectoryStore(path) as store:
        store.append(trajectory)


def build_executor(registry: Registry, name: str, workers: int | None, options: dict[str, Any]) -> Any:
    """The executor ``name`` with ``options``; a factory that refuses them is the user's
    error, named, not a traceback."""
    factory = registry.executor(name).load()
    try:
        return factory(workers, **options)
    except errors.EnvhError:
        raise
    except ImportError as exc:
        raise errors.EnvhError(f"Executor {name!r} needs a package that is not installed: {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise errors.EnvhError(f"Executor {name!r} cannot be built with options {sorted(options)}: "
                               f"{type(exc).__name__}: {exc}") from exc


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


def all_failed(rows: list[dict[str, Any]]) -> str | None:
    """When every final episode of a run failed, what to tell the user (else ``None``)."""
    if not rows or any(not r.get("error_class") for r in rows):
        return None
    classes = Counter(r["error_class"] for r in rows)
    what = ", ".join(f"{n} {c}" for c, n in classes.most_common())
    same = " the same way" if len(classes) == 1 else ""
    return (f"Every episode ({len(rows)}) failed{same}: {what}. `envh show` lists them; the trajectories "
            "hold each error and its traceback.")


def lock_run_dir(out: str | Path) -> Any:
    """An exclusive lock on the run directory (``run.lock``), so two commands never play
    into one run at once; released when the returned file is closed or the process ends."""
    import fcntl
    import os

    fh = open(Path(out) / "run.lock", "a+")  # noqa: SIM115 - the lock lives as long as the file
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise errors.EnvhError(f"{out} is in use by another envh run ({holder}); wait for it to finish, or "
                               "choose another --out directory.") from exc
    fh.truncate(0)
    fh.write(f"pid {os.getpid()}")
    fh.flush()
    return fh


def open_store(out: str | Path) -> TrajectoryStore:
    return TrajectoryStore(out)
