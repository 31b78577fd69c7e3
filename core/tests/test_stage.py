"""Stage: a replay after reset equals stepping the same actions by hand, failures name
the action and what the env said, and the replay is never charged to a budget."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh.bridges.toy24 import CURATED, Toy24Env
from envh.bridges.toy24_solver import combine
from envh.components.budget import Budget
from envh.components.stage import Stage
from envh.errors import ReplayError
from hypothesis import given, settings
from hypothesis import strategies as st

TASKS = [TaskRef(suite="toy24", split=s, instance_id=i) for s in ("easy", "medium", "hard") for i in CURATED[s][:3]]


@st.composite
def valid_prefix(draw: st.DrawFn) -> tuple[TaskRef, list[Action]]:
    """A task and a replay that stays valid: in-range positions, no division by zero."""
    from fractions import Fraction

    task = draw(st.sampled_from(TASKS))
    numbers = [Fraction(int(x)) for x in task.instance_id.split(",")]
    out: list[Action] = []
    for _ in range(draw(st.integers(0, len(numbers) - 1))):
        if draw(st.booleans()) and out:
            out.append(Action(tool="reset"))
            numbers = [Fraction(int(x)) for x in task.instance_id.split(",")]
            continue
        i, j = draw(st.permutations(range(len(numbers))))[:2]
        op = draw(st.sampled_from(["add", "sub", "mul", "div"]))
        nxt = combine(numbers, i, j, op)
        if nxt is None:
            continue
        numbers = nxt
        out.append(Action(tool="combine", args={"i": i, "j": j, "op": op}))
    return task, out


@settings(max_examples=50, deadline=None)
@given(case=valid_prefix(), seed=st.integers(0, 3))
def test_stage_replay_equals_stepping_by_hand(case: tuple[TaskRef, list[Action]], seed: int) -> None:
    task, actions = case
    staged = Stage(Toy24Env(), actions)
    by_hand = Toy24Env()
    first = staged.reset(task=task, seed=seed)
    last = by_hand.reset(task=task, seed=seed).observation
    for action in actions:
        last = by_hand.step(action).observation
    assert first.observation == last == staged.observe()
    assert first.info["stage"] == [{"layer": "stage", "replayed": len(actions)}]
    assert staged.get_env_state() == by_hand.get_env_state()
    assert staged.save_state()["inner"]["actions"] == by_hand.save_state()["actions"]
    assert staged.step(Action(tool="stop")).observation == by_hand.step(Action(tool="stop")).observation
    assert staged.evaluate() == by_hand.evaluate()


def test_a_failing_replay_action_names_its_index_and_the_answer() -> None:
    ok = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
    bad = Action(tool="combine", args={"i": 0, "j": 7, "op": "add"})
    env = Stage(Toy24Env(), [ok, bad])
    with pytest.raises(ReplayError, match=r"failed at action #1") as info:
        env.reset(task=TASKS[0])
    err = info.value
    assert err.index == 1 and err.action == bad
    assert err.observation.startswith("Error: positions must be two different integers in 0..1")
    assert "bad_position" in err.reason and "The env answered" in str(err)


def test_a_replay_that_ends_the_episode_is_an_error() -> None:
    env = Stage(Toy24Env(), [Action(tool="reset"), Action(tool="stop")])
    with pytest.raises(ReplayError, match=r"#1 .*the episode ended during the replay") as info:
        env.reset(task=TASKS[0])
    assert info.value.index == 1 and info.value.observation.startswith("Game over.")


def test_unknown_tool_in_a_spec_stage_is_reported_on_reset() -> None:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "stage", "actions": [{"tool": "teleport"}]}]})
    with pytest.raises(ReplayError, match=r"#0 .*unknown_tool.*Unknown tool 'teleport'"):
        env.reset(task=TASKS[0])


ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})


class _Muted:
    """Passes steps through but swallows the replay notifications."""

    def __init__(self, env):
        self.env = env

    def notify_replay_start(self):
        pass

    def step(self, action):
        return self.env.step(action)

    def notify_replay_complete(self):
        pass


class Forgetful(Stage):
    """A stage that forgets to notify: what every stage would be without the rewind."""

    kind = "forgetful"

    def on_reset(self, result):
        inner = self.inner
        object.__setattr__(self, "inner", _Muted(inner))
        try:
            return super().on_reset(result)
        finally:
            object.__setattr__(self, "inner", inner)


@pytest.mark.parametrize("stage_cls", [Stage, Forgetful])
def test_replay_rewinds_an_inner_budget(stage_cls: type[Stage]) -> None:
    budget = Budget(Toy24Env(), max_steps=3)
    env = stage_cls(budget, [ADD, Action(tool="reset")])
    env.reset(task=TASKS[0])
    truncated = [env.step(Action(tool="reset")).truncated for _ in range(3)]
    if stage_cls is Stage:
        assert budget.steps == 3 and truncated == [False, False, True]
    else:  # the guard: without the notification the replay would be charged
        assert truncated[0] is True


def test_an_outer_budget_never_sees_the_replay() -> None:
    env = Budget(Stage(Toy24Env(), [Action(tool="reset")] * 5), max_steps=3, max_repeats=2)
    env.reset(task=TASKS[0])
    assert env.steps == 0 and env.repeats == 0
    assert not env.step(ADD).truncated and not env.step(ADD).truncated
    assert env.step(Action(tool="reset")).info["truncated_by"] == "step budget of 3 used"


def test_a_replay_longer_than_an_inner_budget_is_not_truncated() -> None:
    env = Stage(Budget(Toy24Env(), max_steps=2, max_repeats=2), [Action(tool="reset")] * 3)
    env.reset(task=TASKS[0])
    assert not env.step(ADD).truncated


def test_a_stage_can_show_the_reset_observation() -> None:
    spec = {"bridge": "toy24", "layers": [{"kind": "stage", "observation": "reset", "actions": [
        {"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}]}]}
    with envh.make(spec) as env:
        first = env.reset(task=TASKS[0])
        assert "[0] 2, [1] 3, [2] 4" in first.observation.text
        assert env.get_env_state()["numbers"] == ["4", "6"]
