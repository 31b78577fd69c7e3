"""After a stage, the base env's observe() is exactly what the policy was shown, in both
observation modes, until the next action, and also after from_state (Toy24)."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef

TASK = TaskRef(suite="toy24", split="easy", instance_id="1,2,3,4")
REPLAY = [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}},
          {"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}]


def spec(mode: str, *extra: dict) -> dict:
    return {"bridge": "toy24", "layers": [{"kind": "stage", "actions": REPLAY, "observation": mode}, *extra]}


@pytest.mark.parametrize("mode", ["last", "reset"])
def test_base_observe_is_what_the_stage_showed(mode):
    with envh.make(spec(mode)) as env:
        first = env.reset(task=TASK, seed=0).observation
        assert ("[0] 1, [1] 2, [2] 3, [3] 4" in first.text) == (mode == "reset")
        assert ("[0] 3, [1] 12" in first.text) == (mode == "last")
        assert env.unwrapped.observe() == first and env.observe() == first
        saved = env.save_state()
        with envh.make(spec(mode)) as restored:
            assert restored.from_state(saved) == first
            assert restored.unwrapped.observe() == first
        nxt = env.step(Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}))
        assert env.unwrapped.observe() == nxt.observation  # the next action ends it
        assert "[0] 15" in nxt.observation.text
        saved = env.save_state()
        with envh.make(spec(mode)) as restored:  # a state past the replay is the bridge's own
            assert restored.from_state(saved) == nxt.observation
            assert restored.unwrapped.observe() == nxt.observation


def test_a_layer_above_the_stage_keeps_its_own_view():
    """The base env holds what the stage showed; a contract above it rewrites what the
    policy reads, as it does for every observation."""
    contract = {"kind": "contract", "id": "shout",
                "code": "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"}
    with envh.make(spec("reset", contract)) as env:
        first = env.reset(task=TASK, seed=0).observation
        base = env.unwrapped.observe()
        assert first.text == base.text.upper() and "[0] 1, [1] 2" in base.text


def test_a_new_reset_forgets_what_was_shown():
    with envh.make(spec("reset")) as env:
        env.reset(task=TASK, seed=0)
        bare = env.unwrapped
        bare.reset(task=TASK, seed=0)  # the bridge alone, no stage
        bare.step(Action(tool="combine", args={"i": 2, "j": 3, "op": "mul"}))
        assert "[2] 12" in bare.observe().text
