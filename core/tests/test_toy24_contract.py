"""Toy24 passes the bridge contract suite; every component kind passes its suite."""

from __future__ import annotations

import pytest
from envh import Action, TaskRef
from envh.bridges.toy24 import Toy24Env
from envh.testing import BridgeContract, ComponentContract


class TestToy24Contract(BridgeContract):
    @pytest.fixture
    def env_factory(self):
        return Toy24Env

    @pytest.fixture
    def task(self):
        return TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")

    @pytest.fixture
    def sample_actions(self):
        return [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                Action(tool="combine", args={"i": 0, "j": 2, "op": "mul"}),
                Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                Action(tool="stop")]


class TestStageContract(ComponentContract):
    @pytest.fixture
    def layer(self):
        return {"kind": "stage", "actions": [{"tool": "reset"}]}


class TestCodeContractContract(ComponentContract):
    @pytest.fixture
    def layer(self):
        return {"kind": "contract", "code": (
            "def filter_action(action, state, memo):\n"
            "    memo['n'] = memo.get('n', 0) + 1\n"
            "    if action.tool == 'combine' and action.args['op'] == 'div':\n"
            "        return Block(reason='division is disabled')\n"
            "def modify_transition(action, response, state, memo):\n"
            "    return evolve(response, info={**response.info, 'seen': memo['n']})\n"
            "def filter_observation(observation, state, memo):\n"
            "    return observation.text + ' [checked]'\n")}


class TestBudgetContract(ComponentContract):
    @pytest.fixture
    def layer(self):
        return {"kind": "budget", "max_steps": 50, "max_repeats": 5}


class TestChainContract(ComponentContract):
    composes_verdicts = True

    @pytest.fixture
    def layer(self):
        return {"kind": "chain", "legs": [{"bridge": "toy24"}],
                "leg_tasks": [{"suite": "toy24", "split": "easy", "instance_id": "2,3,4"}]}
