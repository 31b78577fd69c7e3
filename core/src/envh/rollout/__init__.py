"""Rollouts: policies, the episode runner, executors and the trajectory store.

The public rollout API (plugins import these names from here, never from the modules):
"""

from .plan import wilson  # the project's one Wilson interval (the rigger's reports use it too)
from .policy import PolicyStep
from .runner import run_episode
from .store import TrajectoryStore, build_manifest
from .trajectory import EpisodeRequest, Trajectory, trajectory_from_json
from .warm import Warm, package_versions, resolve_policy

__all__ = ["EpisodeRequest", "PolicyStep", "Trajectory", "TrajectoryStore", "Warm", "build_manifest",
           "package_versions", "resolve_policy", "run_episode", "trajectory_from_json", "wilson"]
