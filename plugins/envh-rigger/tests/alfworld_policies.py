"""A scripted ALFWorld policy that slips on one action class, registered as an inline plugin.

``heat-skipper`` plays each game's reference walkthrough (``plans``: instance id -> the
commands) except its ``heat`` steps: in an episode drawn to slip (probability ``q``, from
the episode seed) it skips the heat and plays the walkthrough's next command instead. So it
solves every task without a heat step and fails heat tasks with probability ``q``. It reads
the engine's answer: when a command it sent came back as a heat (a guide replaced it),
the command it meant was not played, so it plays it again, and the rest of the walkthrough
wins. Past the end of its walkthrough it looks around.
"""

from __future__ import annotations

import random

import envh
from envh import Action
from envh.rollout.policy import PolicyStep


class HeatSkipper:
    policy_id = "test-heat-skipper"

    def __init__(self, arg=None, plans=None, q=1.0, **options):
        self.plans = {str(k): [str(c) for c in v] for k, v in (plans or {}).items()}
        self.q = float(q)
        self.plan: list[str] = []
        self.next, self.slips, self.sent = 0, False, None

    def start(self, *, task, tools, observation, seed=None):
        self.plan = self.plans.get(task.instance_id, [])
        self.next, self.sent = 0, None
        self.slips = random.Random(f"heat-skip-{seed}").random() < self.q

    def act(self, observation, tools):
        heard = str(observation.data.get("feedback", "")).lower()
        if self.sent is not None and not self.sent.startswith("heat ") and heard.startswith("you heat "):
            self.next -= 1  # what it sent was answered by a heat: its own command was not played
        if self.slips and self.next < len(self.plan) and self.plan[self.next].startswith("heat "):
            self.next += 1  # the slip: on to the step after the heat
        command = self.plan[self.next] if self.next < len(self.plan) else "look"
        self.next += 1
        self.sent = command
        return PolicyStep(action=Action(tool="do", args={"command": command}), raw=command)

    def close(self):
        pass


@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="heat-skipper", factory=HeatSkipper)]
