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


FRESH = __import__("random").Random(0)


class Rate:
    """Known true rates: with probability ``rates[n]`` (n = numbers at the start) it plays the
    solver's plan, else it stops at once (a loss unless the start already shows 24). The
    draw comes from the episode seed, so the rate of any candidate is known exactly. With
    ``fresh=True`` it comes from one stream of this process instead (seeded, so a test run in
    one process is repeatable): episodes on the same seed are then independent draws, the
    least favourable case for a paired comparison."""

    policy_id = "test-rate"

    def __init__(self, arg=None, rates=None, fresh=False, **options):
        self.rates = {int(k): float(v) for k, v in (rates or {}).items()}
        self.fresh = bool(fresh)
        self.play = False

    def start(self, *, task, tools, observation, seed=None):
        import random

        n = len(observation.data.get("numbers", []))
        draw = FRESH.random() if self.fresh else random.Random(f"rate-{seed}").random()
        self.play = draw < self.rates.get(n, 1.0 if n <= 1 else 0.0)

    def act(self, observation, tools):
        action = _solver_move(observation.data) if self.play else Action(tool="stop")
        return PolicyStep(action=action, raw=action.tool)

    def close(self):
        pass


class Slow:
    """Always solves, after W wasted (invalid) turns, W ~ Binomial(4 (n - 1), 1/2) for n numbers
    at the start: true mean steps 3 (n - 1) + 1 (10, 7, 4, 1 for n = 4, 3, 2, 1)."""

    policy_id = "test-slow"

    def __init__(self, arg=None, **options):
        self.waste = 0
        self.data = {}

    def start(self, *, task, tools, observation, seed=None):
        import random

        rng = random.Random(f"slow-{seed}")
        self.data = dict(observation.data)
        n = len(self.data.get("numbers", []))
        self.waste = sum(rng.random() < 0.5 for _ in range(4 * max(0, n - 1)))

    def act(self, observation, tools):
        if "numbers" in observation.data:  # an error observation carries no numbers
            self.data = dict(observation.data)
        if self.waste > 0:
            self.waste -= 1
            return PolicyStep(action=Action(tool="think", args={}), raw="think")
        return PolicyStep(action=_solver_move(self.data), raw="solver")

    def close(self):
        pass


class Flaky:
    """A template designer that crashes while the file ``marker`` does not exist."""

    name = "flaky"

    def __init__(self, arg=None, marker="", **options):
        from envh_rigger.designers.template import TemplateDesigner

        self.marker, self.inner = marker, TemplateDesigner()

    def propose(self, ctx):
        from pathlib import Path

        if not Path(self.marker).exists():
            raise RuntimeError("designer crashed")
        return self.inner.propose(ctx)

    def close(self):
        pass


@envh.hookimpl
def envh_designers():
    return [envh.DesignerInfo(name="flaky", factory=Flaky)]


@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="coin", factory=Coin), envh.PolicyInfo(name="solver", factory=Solver),
            envh.PolicyInfo(name="rate", factory=Rate), envh.PolicyInfo(name="slow", factory=Slow),
            envh.PolicyInfo(name="slipper", factory=Slipper)]


class Divider:
    """With probability ``q`` (from the episode seed) it first tries ``combine(0, 1, div)``:
    when that is refused it gives up (stop: a loss); otherwise it starts over and plays the
    solver's plan (a win). So under a contract blocking ``div`` the true rate of "calls div
    and fails" is ``q`` and the success rate ``1 - q``; without one they are 0 and 1."""

    policy_id = "test-divider"

    def __init__(self, arg=None, q=0.5, **options):
        self.q = float(q)
        self.phase = "solve"
        self.data = {}

    def start(self, *, task, tools, observation, seed=None):
        import random

        self.phase = "div" if random.Random(f"div-{seed}").random() < self.q else "solve"
        self.data = dict(observation.data)

    def act(self, observation, tools):
        if self.phase == "div":
            self.phase = "check"
            return PolicyStep(action=Action(tool="combine", args={"i": 0, "j": 1, "op": "div"}), raw="div")
        if self.phase == "check":
            if not observation.data.get("numbers"):  # refused: give up
                return PolicyStep(action=Action(tool="stop"), raw="stop")
            self.phase = "solve"
            return PolicyStep(action=Action(tool="reset"), raw="reset")
        if observation.data.get("numbers"):
            self.data = dict(observation.data)
        return PolicyStep(action=_solver_move(self.data), raw="solver")

    def close(self):
        pass


@envh.hookimpl(specname="envh_policies")
def more_policies():
    return [envh.PolicyInfo(name="divider", factory=Divider)]


AUTO_STOP = '''
def filter_action(action, state, memo):
    if state["reached_target"] and action.tool != "stop":
        return Action(tool="stop", args={})
    return None
'''


class Writer:
    """A designer standing in for a model: it writes contract code of its own."""

    name = "writer"

    def __init__(self, arg=None, cls=None, code=None, config=None, trusted=False, **options):
        self.cls = cls  # name a Python class instead of writing code
        self.code = code or AUTO_STOP
        self.config = {"rate": 0.5} if config is None else dict(config)
        self.trusted = bool(trusted)  # stands in for reviewed code (a template) when set

    def propose(self, ctx):
        from envh_rigger.designers.base import Proposal

        layer = {"cls": self.cls, "config": self.config} if self.cls else {"code": self.code}
        return Proposal(layers=[{"kind": "contract", "id": "written", **layer}], rationale="written")

    def close(self):
        pass


@envh.hookimpl(specname="envh_designers")
def more_designers():
    return [envh.DesignerInfo(name="writer", factory=Writer)]


class Reader:
    """Needs to see every number: when the start observation shows all of them it plays the
    solver's plan for them (a win), else it stops at once (a loss). Under an observation
    mask of rate m each number is hidden with probability m, so the true success rate is
    exactly (1 - m) ** 4 on a four-number puzzle."""

    policy_id = "test-reader"

    def __init__(self, arg=None, **options):
        self.plan = []

    def start(self, *, task, tools, observation, seed=None):
        nums = list(observation.data.get("numbers", []))
        self.plan = []
        if nums and "?" not in nums:
            plan = toy24_solver.solve([Fraction(x) for x in nums], 24) or []
            self.plan = [Action(tool="combine", args={"i": i, "j": j, "op": op}) for i, j, op in plan]

    def act(self, observation, tools):
        action = self.plan.pop(0) if self.plan else Action(tool="stop")
        return PolicyStep(action=action, raw=action.tool)

    def close(self):
        pass


@envh.hookimpl(specname="envh_policies")
def reader_policy():
    return [envh.PolicyInfo(name="reader", factory=Reader)]


class SeedBlocker(envh.EnvHarness):
    """A contract class that blocks ``stop`` in the episodes whose seed is in ``seeds`` only:
    a candidate whose effect varies per episode (like a random draw)."""

    kind = "contract"
    spec_safe = True  # its one option is a list of seeds: an untrusted designer may name it

    def __init__(self, inner, *, layer_id=None, seeds=()):
        super().__init__(inner, layer_id=layer_id)
        self.seeds, self.seed = {int(s) for s in seeds}, None

    def reset(self, *, task=None, seed=None, options=None):
        self.seed = seed
        return super().reset(task=task, seed=seed, options=options)

    def filter_action(self, action, state):
        if action.tool == "stop" and self.seed in self.seeds:
            return envh.Block(reason="no stopping in this episode")
        return action


class Slipper:
    """Plays the solver's move from the current numbers, except that when the move is a
    ``sub`` or ``div`` (``slips``) it plays ``add`` on the same positions instead with
    probability ``q`` (drawn from the episode seed and the step): near-perfect on add and
    mul, weak on the operators it slips on. Without a plan it stops."""

    policy_id = "test-slipper"

    def __init__(self, arg=None, q=0.8, slips=("sub", "div"), **options):
        self.q, self.slips = float(q), tuple(slips)
        self.seed, self.turn = 0, 0

    def start(self, *, task, tools, observation, seed=None):
        self.seed, self.turn = seed, 0

    def act(self, observation, tools):
        import random

        self.turn += 1
        action = _solver_move(observation.data)
        if action.tool == "combine" and action.args["op"] in self.slips:
            if random.Random(f"slip-{self.seed}-{self.turn}").random() < self.q:
                action = Action(tool="combine", args={**action.args, "op": "add"})
        return PolicyStep(action=action, raw=action.tool)

    def close(self):
        pass
