"""Shared fixtures of the rollout tests: the helper policies are importable by worker
processes (``plugins=["rollout_policies"]`` with this folder on ``PYTHONPATH``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import envh  # noqa: E402
import hostile  # noqa: E402
import rollout_policies  # noqa: E402


@pytest.fixture
def registry():
    """A fresh registry with core's built-ins and the helper policies only."""
    reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies, hostile])
    envh.plugins.set_registry(reg)
    yield reg
    envh.plugins.set_registry(None)


@pytest.fixture
def worker_env(monkeypatch):
    """Worker processes find the helper policies through PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    return {"plugins": ["rollout_policies", "hostile"], "entry_points": False}


@pytest.fixture
def shared_dir():
    """A directory every user can read (pool workers may run as nobody; pytest's own
    temporary directories are private to root)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="envh-rollout-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_executor():
    """One local Ray cluster and executor for the whole session (Ray starts in ~20 s)."""
    pytest.importorskip("ray")
    import ray
    from envh.rollout.executors.ray import RayExecutor

    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), saved.get("PYTHONPATH", "")) if p)
    os.environ["FAKE_RAY_API_KEY"] = "sk-ray"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        # grace_s: the watchdog counts from submission, so it must outlast an actor's start on
        # a loaded machine (1.0 killed a 0.3 s-limit episode as hung before its own deadline)
        executor = RayExecutor(2, plugins=["rollout_policies", "hostile"], entry_points=False, grace_s=3.0,
                               retries=1, memory_mb=3000)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield executor
    executor.close()
    ray.shutdown()


@pytest.fixture
def cli_env():
    """The environment of an ``envh`` command run as a process: the helper policies on its
    PYTHONPATH, a fixed terminal width."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "120"
    return env
