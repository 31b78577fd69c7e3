"""Deterministic Toy24 policies for the rigger tests, registered as an inline plugin.

``coin`` is a weak policy whose success depends on the start state: from four numbers it
always blunders; with two numbers left it plays the solver's move on every other
episode; with one number left it stops. So a stage replaying two of the three solution
steps lands it at a success rate of 0.5, and replaying all three at 1.0.
``solver`` always wins (it reads the numbers from the observation's data).
"""

from __future__ import annotations

import time
from fractions import Fraction

import envh
from envh import Action
from envh.bridges import toy24_solver
from envh.rollout.policy import PolicyStep


def _solver_move(data):
    nums = [Fraction(x) for x in data["numbers"]]
    plan = toy24_solver.solve(nums, data.get("target", 24)) if len(nums) > 1 else []
    if not plan:
        return Action(tool="stop")
    i, j, op = plan[0]
    return Action(tool="combine", args={"i": i, "j": j, "op": op})


class Coin:
    policy_id = "test-coin"

    def __init__(self, arg=None, delay=0.0, **options):
        self.episodes = 0
        self.lucky = False
        self.delay = float(delay)

    def start(self, *, task, tools, observation, seed=None):
        self.episodes += 1
        self.lucky = self.episodes % 2 == 0

    def act(self, observation, tools):
        time.sleep(self.delay)
        numbers = observation.data.get("numbers", [])
        if len(numbers) <= 1:
            action = Action(tool="stop")
        elif len(numbers) == 2 and self.lucky:
            action = _solver_move(observation.data)
        else:
            action = Action(tool="combine", args={"i": 0, "j": 1, "op": "sub"})
        return PolicyStep(action=action, raw=action.tool, usage={"completion_tokens": 2})

    def close(self):
        pass


class Solver:
    policy_id = "test-solver"

    def __init__(self, arg=None, **options):
        pass

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        return PolicyStep(action=_solver_move(observation.data), raw="solver")

    def close(self):
        pass


@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="coin", factory=Coin), envh.PolicyInfo(name="solver", factory=Solver)]
