"""``envh.gym``: stacks behind gymnasium's API, checked by gymnasium's own checker."""

from __future__ import annotations

import json
import subprocess
import sys

import envh
import envh.gym
import gymnasium
import numpy as np
import pytest
from envh import errors
from envh.gym import EnvhGymEnv, register_envs
from gymnasium.utils.env_checker import check_env

SPEC = {"bridge": "toy24", "layers": [
    {"kind": "contract", "code": "def filter_observation(observation, state, memo):\n"
                                 "    return observation.text + ' (steps: ' + str(state['steps']) + ')'\n"},
    {"kind": "budget", "max_steps": 6}]}
ADD = {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}


@pytest.fixture(scope="module")
def registered():
    ids = register_envs(envh.make_plugin_manager(entry_points=False))
    yield ids
    for env_id in ids:
        del gymnasium.registry[env_id]


def test_import_envh_does_not_import_gymnasium() -> None:
    code = "import sys, envh; print('gymnasium' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("action_format", ["json", "dict"])
def test_check_env_passes_on_a_stack(action_format: str) -> None:
    env = EnvhGymEnv(SPEC, split="easy", action_format=action_format)
    check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("action_format", ["json", "dict"])
def test_check_env_passes_through_make(registered, action_format: str) -> None:
    env = gymnasium.make("envh/toy24", split="medium", action_format=action_format, render_mode="ansi")
    check_env(env.unwrapped)
    env.close()


def test_register_envs_makes_every_bridge_and_is_idempotent(registered) -> None:
    assert registered == ["envh/toy24"]
    assert register_envs(envh.make_plugin_manager(entry_points=False)) == []


def test_json_actions_play_a_task(registered) -> None:
    env = gymnasium.make("envh/toy24", task="easy/2,3,4")
    obs, info = env.reset(seed=1)
    assert obs.startswith("Target: 24. Numbers: [0] 2, [1] 3, [2] 4") and info["task"] == "toy24/easy/2,3,4"
    for _ in range(2):
        obs, reward, terminated, truncated, info = env.step(json.dumps(
            {"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}))
    obs, reward, terminated, truncated, info = env.step('{"tool": "stop"}')
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert env.unwrapped.env.evaluate().success
    env.close()


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", '{"args": {}}', '{"tool": "stop", "args": 3}',
                                 '{"tool": "fly"}', '{"tool": "combine", "args": {"i": "x"}}'])
def test_malformed_json_actions_are_error_observations(bad: str) -> None:
    env = EnvhGymEnv({"bridge": "toy24"})
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(bad)
    assert obs.startswith("Error: ") and info["error"]["type"] in ("invalid_action", "unknown_tool",
                                                                    "invalid_arguments")
    assert (reward, terminated, truncated) == (0.0, False, False)


def test_dict_actions_are_decoded_from_the_tool_schemas() -> None:
    env = EnvhGymEnv({"bridge": "toy24"}, task="easy/2,3,4", action_format="dict")
    space = env.action_space
    assert list(space["args"].keys()) == ["combine", "reset", "stop"]
    assert space["args"]["combine"]["op"].n == 4 and space["tool"].n == 3
    env.reset(seed=0)
    action = space.sample()
    action.update(tool=0, args={**action["args"], "combine": {"i": 0, "j": 1, "op": 2}})  # op 2 = mul
    obs, *_ = env.step(action)
    assert "Numbers: [0] 4, [1] 6" in obs
    assert space["args"]["stop"] == gymnasium.spaces.Discrete(1)
    obs, reward, terminated, *_ = env.step({"tool": 2, "args": {}})
    assert terminated and reward == 0.0


def test_split_draws_tasks_reproducibly_by_seed() -> None:
    a, b = EnvhGymEnv({"bridge": "toy24"}, split="hard"), EnvhGymEnv({"bridge": "toy24"}, split="hard")
    tasks_a = [a.reset(seed=7)[1]["task"]] + [a.reset()[1]["task"] for _ in range(5)]
    tasks_b = [b.reset(seed=7)[1]["task"]] + [b.reset()[1]["task"] for _ in range(5)]
    assert tasks_a == tasks_b and all(t.startswith("toy24/hard/") for t in tasks_a) and len(set(tasks_a)) > 1
    assert a.reset(options={"task": "easy/1,3,8"})[1]["task"] == "toy24/easy/1,3,8"


def test_the_stack_shapes_what_gym_sees() -> None:
    env = EnvhGymEnv(SPEC, task="easy/2,3,4")
    obs, _ = env.reset(seed=0)
    assert obs.endswith("(steps: 0)")
    truncated = [env.step('{"tool": "reset"}')[3] for _ in range(6)]
    assert truncated == [False] * 5 + [True]


def test_bad_options_are_value_errors() -> None:
    with pytest.raises(ValueError, match="action_format must be 'json' or 'dict'"):
        EnvhGymEnv({"bridge": "toy24"}, action_format="xml")


def test_the_standard_random_loop_ends_on_a_registered_id(registered) -> None:
    env = gymnasium.make("envh/toy24")
    assert env.spec.max_episode_steps == envh.gym.DEFAULT_MAX_EPISODE_STEPS
    for seed in range(3):
        env.reset(seed=seed)
        env.action_space.seed(seed)
        done, steps = False, 0
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done, steps = terminated or truncated, steps + 1
        assert steps <= envh.gym.DEFAULT_MAX_EPISODE_STEPS
    env.close()


def test_sampled_dict_actions_are_mostly_actionable() -> None:
    """Positions are bounded by the puzzle, so random combines mostly reach the game."""
    env = EnvhGymEnv({"bridge": "toy24"}, task="medium/1,2,6,6")
    env.reset(seed=3)
    env.action_space.seed(3)
    assert env.action_space["args"]["combine"]["i"] == gymnasium.spaces.Discrete(4)
    errors = 0
    for _ in range(200):
        env.reset()
        action = env.action_space.sample()
        action["tool"] = 0
        _, _, _, _, info = env.step(action)
        errors += "error" in info
    assert errors < 60  # only i == j is refused (1 in 4)


def test_without_a_task_each_seed_draws_across_every_split() -> None:
    env = EnvhGymEnv({"bridge": "toy24"})
    tasks = {env.reset(seed=s)[1]["task"] for s in range(12)}
    assert len(tasks) > 6 and len({t.split("/")[1] for t in tasks}) > 1


def test_an_unknown_split_or_task_is_refused_by_name() -> None:
    with pytest.raises(envh.errors.UnknownNameError, match="Unknown Toy24 split 'nosuch'"):
        EnvhGymEnv({"bridge": "toy24"}, split="nosuch")
    env = EnvhGymEnv({"bridge": "toy24"})
    with pytest.raises(envh.errors.UnknownNameError, match="Unknown toy24 split 'hardest'"):
        env.reset(options={"task": "hardest/1,2,3,4"})


def test_a_tool_index_outside_the_space_is_an_error_observation_not_another_tool() -> None:
    env = EnvhGymEnv({"bridge": "toy24"}, task="easy/2,3,4")
    env.reset(seed=0)
    for index in (-1, len(env._codec.names), 10**6):
        obs, _, terminated, truncated, info = env.step({"tool": np.int64(index), "args": {}})
        assert info["error"]["type"] == "invalid_action" and "outside" in obs
        assert not terminated and not truncated  # -1 used to pick the last tool, ``stop``, and end the episode
    env.close()


@pytest.mark.parametrize("schema", [{"type": "integer", "minimum": 3, "maximum": 1},
                                    {"type": "number", "minimum": 2.0, "maximum": 1.0}])
def test_a_tool_schema_with_reversed_bounds_is_a_typed_error(schema) -> None:
    from envh import ToolSpec
    from envh.gym import ToolActionSpace

    with pytest.raises(errors.SpecError, match="maximum < minimum"):
        ToolActionSpace([ToolSpec(name="t", description="", parameters={"type": "object", "properties": {"x": schema}})])
