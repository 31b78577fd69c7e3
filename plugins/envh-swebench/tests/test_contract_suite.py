"""The swebench bridge passes envh's bridge contract suite on a real container."""

from __future__ import annotations

import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract


class TestSWEBenchContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, instances_path):
        from envh_swebench.bridge import SWEBenchEnv

        return lambda: SWEBenchEnv(instances_path)

    @pytest.fixture
    def task(self):
        return TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")

    @pytest.fixture
    def sample_actions(self, fix_action):
        # Outputs must be deterministic across containers: no pytest timings here.
        return [Action(tool="bash", args={"command": "grep -n 'def median' -A6 mathx/stats.py"}),
                fix_action,
                Action(tool="bash", args={"command": "git diff --stat"}),
                Action(tool="submit", args={})]
