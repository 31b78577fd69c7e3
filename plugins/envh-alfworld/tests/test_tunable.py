"""Tunable ALFWorld difficulty: rooms follow their parameters, ``task_for`` builds real games
with alfworld's generator that the real engine plays and its verifier scores, and the
curriculum layer drives the room size through them."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh_alfworld import catalogue, data
from envh_alfworld.catalogue import TASK_TYPES
from envh_alfworld.tunable import PARAMETERS, room_for

EASY = {"task_tier": 1, "receptacles": 3, "distractors": 0, "closed": 0}
HARD = {"task_tier": 6, "receptacles": 12, "distractors": 8, "closed": 6}


def openable(name: str) -> bool:
    return catalogue.RECEPTACLES[name.rsplit(" ", 1)[0]]


@pytest.mark.parametrize("params", [EASY, HARD, {"task_tier": 3, "receptacles": 5, "distractors": 2, "closed": 4},
                                    {"task_tier": 2, "receptacles": 7, "distractors": 5, "closed": 1}])
def test_rooms_follow_their_parameters(params) -> None:
    types = set()
    for seed in range(30):
        room = room_for(params, seed)
        assert room == room_for(params, seed)  # deterministic
        assert len(room.receptacles) == params["receptacles"]
        closable = sum(openable(r.name) for r in room.receptacles)
        assert sum(r.closed for r in room.receptacles) == min(params["closed"], closable)
        own = 2 if room.goal.task_type == "pick_two_obj_and_place" else 1
        own += room.goal.task_type == "look_at_obj_in_light"  # the lamp
        assert len(room.objects) == own + params["distractors"]
        types.add(room.goal.task_type)
    assert types <= set(TASK_TYPES[:params["task_tier"]])
    if params["task_tier"] >= 3:
        assert len(types) >= 2  # the tier is a ladder: easier types stay in the mix


def test_closed_receptacles_are_honoured_where_the_room_can_hold_them() -> None:
    # with room for openable classes, every asked-for closed receptacle is there
    for seed in range(30):
        room = room_for({**EASY, "receptacles": 8, "closed": 4}, seed)
        assert sum(r.closed for r in room.receptacles) == 4


@pytest.mark.parametrize("params", [{"task_tier": 0}, {"task_tier": 7}, {"receptacles": 2.0},
                                    {"closed": True}, {"rooms": 3}, {"distractors": "3"}])
def test_bad_parameter_values_are_refused(params) -> None:
    with pytest.raises(errors.EnvhError):
        room_for(params, 0)


def walkthrough(root: Path, task) -> list[str]:
    return json.loads(Path(data.game_file_for(root, task)).read_text())["walkthrough"]


def receptacles_seen(text: str) -> int:
    seen = text.split("you see", 1)[1].split(".", 1)[0]
    return len(re.findall(r"\b[a-z]+ \d+", seen))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("alfworld-tunable")


def test_task_for_builds_real_games_the_engine_plays_and_the_verifier_scores(root: Path) -> None:
    from envh_alfworld.bridge import AlfworldEnv

    env = AlfworldEnv(data_path=str(root), max_steps=None)
    try:
        assert set(env.tunable_parameters()) == set(PARAMETERS)
        for params in (EASY, HARD):
            task = env.task_for(params, random.Random(0))
            assert task in env.list_tasks("train")
            first = env.reset(task=task, seed=0)
            assert receptacles_seen(first.observation.text) == params["receptacles"], first.observation.text
            if params is EASY:
                assert first.info["task_type"] == "pick_and_place_simple"
            assert env.evaluate().success is False
            steps = walkthrough(root, task)
            for command in steps:
                resp = env.step(Action(tool="do", args={"command": command}))
            assert resp.terminated and env.evaluate().success is True
        # the same draw is the same game, from the builder's cache
        assert env.task_for(EASY, random.Random(0)) == env.task_for(EASY, random.Random(0))
    finally:
        env.close()


def test_the_curriculum_layer_grows_the_room_through_real_games(root: Path) -> None:
    spec = {"bridge": "alfworld", "config": {"data_path": str(root), "max_steps": None}, "layers": [{
        "kind": "curriculum", "training": True, "anchor": 0.0, "seed": 1,
        "params": {"receptacles": {"range": [3, 4], "init": 3}, "task_tier": {"range": [1, 1], "init": 1},
                   "distractors": {"range": [0, 0], "init": 0}, "closed": {"range": [0, 0], "init": 0}},
        "policy": {"window": 1, "floor": 0.0, "ceiling": 0.5, "early": False}}]}
    seen = []
    with envh.make(spec, data=[root]) as env:
        for i in range(2):
            result = env.reset(seed=i)
            seen.append((result.info["curriculum"]["params"]["receptacles"],
                         receptacles_seen(result.observation.text)))
            assert result.info["envh"][-1]["task"] == str(env.unwrapped.task)
            for command in walkthrough(root, env.unwrapped.task):
                env.step(Action(tool="do", args={"command": command}))
            assert env.unwrapped.evaluate().success is True
    assert seen == [(3, 3), (4, 4)]


def test_a_bridge_limited_to_harder_types_gets_its_easiest_and_a_read_only_root_is_an_env_error(
        tmp_path: Path) -> None:
    heat_only = ("pick_heat_then_place_in_recep",)
    assert {room_for(EASY, seed, heat_only).goal.task_type for seed in range(10)} == set(heat_only)
    assert {room_for({**EASY, "task_tier": 6}, s, heat_only + ("pick_two_obj_and_place",)).goal.task_type
            for s in range(20)} == {"pick_heat_then_place_in_recep", "pick_two_obj_and_place"}
    from envh_alfworld.bridge import AlfworldEnv

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data root should be")
    env = AlfworldEnv(data_path=str(blocker / "data"))
    try:
        with pytest.raises(errors.EnvError, match="Cannot build an ALFWorld game"):
            env.task_for(EASY, random.Random(0))
    finally:
        env.close()
