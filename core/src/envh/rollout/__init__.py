"""Rollouts: policies, the episode runner, executors and the trajectory store.

This is the public rollout API other packages import (``from envh.rollout import
run_episode, TrajectoryStore, ...``); the submodules are internals. Names load lazily,
so ``import envh.rollout`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    # one episode
    "run_episode": "runner", "infra_failure": "runner", "EpisodeRequest": "trajectory",
    "Trajectory": "trajectory", "StepRecord": "trajectory", "ModelTurn": "trajectory",
    "ERROR_CLASSES": "trajectory", "trajectory_from_json": "trajectory", "trajectory_to_json": "trajectory",
    "trajectory_from_data": "trajectory", "trajectory_to_data": "trajectory",
    "request_from_data": "trajectory", "request_to_data": "trajectory",
    # policies
    "Policy": "policy", "PolicyStep": "policy", "resolve_policy": "warm", "parse_policy_spec": "warm",
    # warm workers and executors
    "Warm": "warm", "package_versions": "warm", "build_executor": "plan",
    "PoolExecutor": "executors.pool", "InlineExecutor": "executors.inline",
    # runs and the store
    "TrajectoryStore": "store", "build_manifest": "store", "FILENAME": "store", "run_dir_exists": "store",
    "build_plan": "plan", "select_tasks": "plan", "summarize": "plan",
    "wilson": "plan",  # the project's one Wilson interval (the rigger's reports use it too)
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'envh.rollout' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
