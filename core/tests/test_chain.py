"""Chain: sequential and alternate legs, carry, the composite verdict, and closing every
leg even when one fails."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh.bridges.toy24 import Toy24Env
from envh.components.chain import Chain
from envh.errors import EnvError

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")  # (2+4)*... : 2*3*4
OTHER = {"suite": "toy24", "split": "easy", "instance_id": "1,3,8"}  # 1*3*8
SOLVE_FIRST = [Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}),
               Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}), Action(tool="stop")]


def chain(mode: str = "sequential", carry: bool = False) -> envh.ActionableEnv:
    return envh.make({"bridge": "toy24", "layers": [{"kind": "chain", "mode": mode, "carry": carry,
                                                     "legs": [{"bridge": "toy24"}], "leg_tasks": [OTHER]}]})


def test_sequential_starts_the_next_leg_lazily_and_needs_both_verdicts() -> None:
    env = chain()
    env.reset(task=EASY)
    assert env.get_env_state()["legs"][1] is None  # not started yet
    for action in SOLVE_FIRST[:-1]:
        assert env.step(action).info["chain"]["leg"] == 0
    switched = env.step(SOLVE_FIRST[-1])
    assert switched.info["envh"][-1]["switched_to"] == 1 and not switched.terminated
    assert switched.observation.data["numbers"] == ["1", "3", "8"]
    assert env.evaluate().success is False  # leg 1 not solved yet
    assert env.evaluate().metrics["legs"][0]["success"] is True
    for action in SOLVE_FIRST[:-1]:
        env.step(action)
    assert env.step(Action(tool="stop")).terminated
    verdict = env.evaluate()
    assert verdict.success is True and verdict.score == 1.0


def test_one_failed_leg_fails_the_chain() -> None:
    env = chain()
    env.reset(task=EASY)
    env.step(Action(tool="stop"))  # leg 0 given up
    for action in SOLVE_FIRST:
        env.step(action)
    verdict = env.evaluate()
    assert [leg["success"] for leg in verdict.metrics["legs"]] == [False, True]
    assert verdict.success is False and verdict.score == 0.5


def test_alternate_switches_every_step() -> None:
    env = chain(mode="alternate")
    env.reset(task=EASY)
    legs = [env.step(Action(tool="reset")).info["chain"]["leg"] for _ in range(4)]
    assert legs == [1, 0, 1, 0]
    state = env.get_env_state()
    assert state["legs"][0]["steps"] == 2 and state["legs"][1]["steps"] == 2


def test_alternate_skips_finished_legs() -> None:
    env = chain(mode="alternate")
    env.reset(task=EASY)
    env.step(Action(tool="stop"))  # leg 0 ends
    assert [env.step(Action(tool="reset")).info["chain"]["leg"] for _ in range(2)] == [1, 1]
    assert env.step(Action(tool="stop")).terminated


def test_carry_prefixes_the_previous_legs_last_observation() -> None:
    env = chain(carry=True)
    env.reset(task=EASY)
    text = env.step(Action(tool="stop")).observation.text
    assert text.startswith("[previous task]\nGame over.") and "[next task]\nTarget: 24. Numbers: [0] 1" in text
    plain = chain(carry=False)
    plain.reset(task=EASY)
    assert plain.step(Action(tool="stop")).observation.text.startswith("Target: 24")


class Exploding(Toy24Env):
    closed: list[str] = []

    def close(self) -> None:
        raise RuntimeError("engine refused to stop")


class Recording(Toy24Env):
    closed: list[str] = []

    def close(self) -> None:
        Recording.closed.append(self.name)


def test_close_closes_every_leg_even_if_one_raises() -> None:
    Recording.closed = []
    env = Chain(Recording(), [Exploding(), Recording(), Exploding()])
    with pytest.raises(EnvError, match="closing 2 chain leg\\(s\\) failed.*engine refused to stop"):
        env.close()
    assert Recording.closed == ["toy24", "toy24"]


def test_a_leg_that_fails_to_build_closes_the_ones_built() -> None:
    Recording.closed = []
    reg = envh.make_plugin_manager(entry_points=False)
    reg.register(_RecordingPlugin, name="recording")
    with pytest.raises(envh.errors.UnknownNameError, match="Unknown bridge 'missing'"):
        envh.make({"bridge": "recording", "layers": [{"kind": "chain", "legs": [
            {"bridge": "recording"}, {"bridge": "missing"}]}]}, registry=reg)
    assert Recording.closed == ["toy24", "toy24"]  # the built leg, then the base


class _RecordingPlugin:
    @staticmethod
    @envh.hookimpl
    def envh_bridges():
        return [envh.BridgeInfo(name="recording", factory=Recording)]


def test_only_one_leg_is_a_spec_error() -> None:
    with pytest.raises(envh.errors.SpecError, match=r"invalid value: Length of 'legs' must be >= 1: 0 @ \$\.layers\[0\]"):
        envh.parse_spec({"bridge": "toy24", "layers": [{"kind": "chain", "legs": []}]})
