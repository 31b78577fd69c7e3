"""Fixtures: a fresh registry per test with core, this plugin and the test policies."""

from __future__ import annotations

import sys
from pathlib import Path

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
