"""Fixtures: a fresh registry per test with core, this plugin and the test policies."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import envh  # noqa: E402
import envh_rigger.hooks  # noqa: E402
import rig_policies  # noqa: E402
from envh.plugins import set_registry  # noqa: E402

MEDIUM = envh.TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")


@pytest.fixture
def registry():
    reg = envh.make_plugin_manager(entry_points=False, plugins=[envh_rigger.hooks, rig_policies])
    set_registry(reg)
    yield reg
    set_registry(None)


@pytest.fixture
def task():
    return MEDIUM


@pytest.fixture(scope="session")
def bench() -> ModuleType:
    """``bench/identical_candidate.py`` loaded as a module: its model of the loop's rule."""
    path = Path(__file__).resolve().parents[3] / "bench" / "identical_candidate.py"
    spec = importlib.util.spec_from_file_location("identical_candidate_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
