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

import rollout_policies  # noqa: E402

import envh  # noqa: E402


@pytest.fixture
def registry():
    """A fresh registry with core's built-ins and the helper policies only."""
    reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies])
    envh.plugins.set_registry(reg)
    yield reg
    envh.plugins.set_registry(None)


@pytest.fixture
def worker_env(monkeypatch):
    """Worker processes find the helper policies through PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    return {"plugins": ["rollout_policies"], "entry_points": False}
