"""Toy24: policy mistakes are error observations, never exceptions; every listed task is
solvable and the solver's plan wins."""

from __future__ import annotations

import pytest
from envh import Action, TaskRef
from envh.bridges.toy24 import Toy24Env
from envh.errors import EnvhError, UnknownNameError

HUGE = "y" * 5_000_000


@pytest.fixture
def env() -> Toy24Env:
    env = Toy24Env()
    env.reset(task=TaskRef(suite="toy24", split="easy", instance_id="2,3,4"))
    return env


@pytest.mark.parametrize(("action", "kind", "says"), [
    (Action(tool="fly"), "unknown_tool", "Unknown tool 'fly'. Available tools: combine, reset, stop."),
    (Action(tool=HUGE), "unknown_tool", "Unknown tool 'yyyy"),
    (Action(tool="combine", args={"i": "0", "j": 1, "op": "add"}), "invalid_arguments", "i must be integer, got string"),
    (Action(tool="combine", args={"i": True, "j": 1, "op": "add"}), "invalid_arguments", "i must be integer, got boolean"),
    (Action(tool="combine", args={"i": 0.5, "j": 1, "op": "add"}), "invalid_arguments", "must be integer, got number"),
    (Action(tool="combine", args={"i": 0, "j": 1}), "invalid_arguments", "missing required argument 'op'"),
    (Action(tool="combine", args={"i": 0, "j": 1, "op": "pow"}), "invalid_arguments", "must be one of"),
    (Action(tool="combine", args={"i": 0, "j": 1, "op": HUGE}), "invalid_arguments", "must be one of"),
    (Action(tool="combine", args={"i": 0, "j": 1, "op": "add", "k": 2}), "invalid_arguments", "unknown argument 'k'"),
    (Action(tool="combine", args={"i": [[{}]], "j": 1, "op": "add"}), "invalid_arguments", "must be integer, got array"),
    (Action(tool="stop", args={"now": HUGE}), "invalid_arguments", "unknown argument 'now'"),
    (Action(tool="combine", args={"i": 0, "j": 0, "op": "add"}), "bad_position", "two different integers"),
    (Action(tool="combine", args={"i": 10**30, "j": -1, "op": "add"}), "bad_position", "in 0..2"),
    ("combine(0, 1, add)", "invalid_action", "Expected an Action(tool=..., args=...), got str"),
    (None, "invalid_action", "got NoneType"),
])
def test_bad_actions_are_error_observations(env: Toy24Env, action: object, kind: str, says: str) -> None:
    before = env.get_env_state()
    resp = env.step(action)  # type: ignore[arg-type]
    assert resp.info["error"]["type"] == kind
    assert says in resp.observation.text and resp.observation.text.startswith("Error: ")
    assert len(resp.observation.text) < 1_000 and not resp.terminated and resp.reward == 0.0
    after = env.get_env_state()
    assert after["numbers"] == before["numbers"]


def test_division_by_zero_is_an_error_observation(env: Toy24Env) -> None:
    env.step(Action(tool="combine", args={"i": 0, "j": 0 + 1, "op": "sub"}))  # 2 - 3 = -1
    env.step(Action(tool="combine", args={"i": 1, "j": 0, "op": "add"}))  # -1 + 4 = 3
    resp = env.step(Action(tool="combine", args={"i": 0, "j": 0, "op": "div"}))
    assert resp.info["error"]["type"] == "bad_position"


def test_stepping_after_stop_is_an_error_observation(env: Toy24Env) -> None:
    assert env.step(Action(tool="stop")).terminated
    resp = env.step(Action(tool="reset"))
    assert resp.info["error"]["type"] == "episode_over"


def test_step_before_reset_is_an_env_error() -> None:
    with pytest.raises(EnvhError, match=r"step\(\) called before reset\(\)"):
        Toy24Env().step(Action(tool="stop"))


def test_bad_instance_ids_and_splits() -> None:
    with pytest.raises(EnvhError, match="Bad Toy24 instance id 'a,b'"):
        Toy24Env().reset(task=TaskRef(suite="toy24", instance_id="a,b"))
    with pytest.raises(UnknownNameError, match="Choose one of: easy, generated, hard, medium"):
        Toy24Env().list_tasks("expert")


def test_every_listed_task_is_solved_by_the_solvers_plan() -> None:
    env = Toy24Env(n_generated=20)
    tasks = env.list_tasks()
    assert len(tasks) == 50
    for task in tasks:
        env.reset(task=task, seed=0)
        plan = env.solve()
        assert plan is not None, task
        for action in plan:
            resp = env.step(action)
            assert not resp.info.get("error"), (task, action, resp.observation.text)
        assert resp.terminated and resp.reward == 1.0 and env.evaluate().success, task


def test_custom_targets() -> None:
    env = Toy24Env()
    env.reset(task=TaskRef(suite="toy24", instance_id="2,5->10"))
    env.step(Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}))
    env.step(Action(tool="stop"))
    assert env.evaluate().success and env.get_env_state()["target"] == 10
