"""The envh bridge contract suite, run on a real ALFWorld game (heat a potato)."""

from __future__ import annotations

import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract


class TestAlfworldContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, make_env):
        return lambda: make_env(max_steps=50, max_repeats=5)

    @pytest.fixture
    def task(self, built) -> TaskRef:
        return built["pick_heat_then_place_in_recep"].task

    @pytest.fixture
    def sample_actions(self, built) -> list[Action]:
        plan = built["pick_heat_then_place_in_recep"].walkthrough
        return [Action(tool="do", args={"command": c}) for c in plan]
