"""The swebench bridge passes envh's bridge contract suite on a real container."""

from __future__ import annotations

import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract

FIX_OLD = "    return ordered[len(ordered) // 2]\n"
FIX_NEW = ("    middle = len(ordered) // 2\n    if len(ordered) % 2 == 0:\n"
           "        return (ordered[middle - 1] + ordered[middle]) / 2\n    return ordered[middle]\n")


class TestSWEBenchContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, instances_path):
        from envh_swebench.bridge import SWEBenchEnv

        return lambda: SWEBenchEnv(instances_path)

    @pytest.fixture
    def task(self):
        return TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")

    @pytest.fixture
    def sample_actions(self):
        # Outputs must be deterministic across containers: no pytest timings here.
        return [Action(tool="bash", args={"command": "grep -n 'def median' -A6 mathx/stats.py"}),
                Action(tool="str_replace_editor", args={
                    "command": "str_replace", "path": "mathx/stats.py", "old_str": FIX_OLD, "new_str": FIX_NEW}),
                Action(tool="bash", args={"command": "git diff --stat"}),
                Action(tool="submit", args={})]
