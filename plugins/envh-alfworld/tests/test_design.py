"""The designer templates (``envh_templates``): every magnitude builds a stack that resets
on the real engine, and the effects point the promised way."""

from __future__ import annotations

import envh
import pytest
from envh import Action


def do(command: str) -> Action:
    return Action(tool="do", args={"command": command})


@pytest.fixture(scope="module")
def registry():
    from envh_alfworld import hooks

    return envh.make_plugin_manager(entry_points=False, plugins=[hooks])


def base_spec(games_root) -> dict:
    return {"bridge": "alfworld", "config": {"data_path": str(games_root)}}


@pytest.mark.parametrize("task_type", ["pick_and_place_simple", "pick_heat_then_place_in_recep",
                                       "pick_two_obj_and_place", "look_at_obj_in_light"])
def test_every_template_magnitude_builds_and_resets(registry, games_root, built, task_type):
    task = built[task_type].task
    names = sorted(n for n in registry.templates() if n.startswith("alfworld."))  # the core adds toy24's
    assert names == ["alfworld.block-teleport", "alfworld.hide-target", "alfworld.precomplete-subgoal",
                     "alfworld.reveal-target", "alfworld.truncate-room"]
    with envh.make(base_spec(games_root), registry=registry) as env:
        for name in names:
            template = registry.templates()[name].load()()
            assert template.direction in ("scaffold", "pressure")
            env.reset(task=task, seed=0)
            magnitudes = template.magnitudes(env, task)
            if name == "alfworld.hide-target" and task_type == "pick_two_obj_and_place":
                assert magnitudes == [], "its only openable receptacle already holds a pen"
            else:
                assert magnitudes, name
            for magnitude in magnitudes:
                env.reset(task=task, seed=0)
                layers = template.instantiate(env, task, magnitude)
                with envh.make({**base_spec(games_root), "layers": layers}, registry=registry) as stacked:
                    stacked.reset(task=task, seed=0)
                    assert stacked.evaluate().success is False


def test_scaffolds_shorten_and_pressure_lengthens(registry, games_root, built):
    from envh_alfworld.design import HideTarget, PrecompleteSubgoal, RevealTarget

    game = built["pick_heat_then_place_in_recep"]
    with envh.make(base_spec(games_root), registry=registry) as env:
        env.reset(task=game.task)
        heat = PrecompleteSubgoal().instantiate(env, game.task, "heat")
        hide = HideTarget().instantiate(env, game.task, HideTarget().magnitudes(env, game.task)[-1])
        reveal = RevealTarget().instantiate(env, game.task, 1)
    with envh.make({**base_spec(games_root), "layers": heat}, registry=registry) as env:
        env.reset(task=game.task)
        for command in ("go to countertop 1", "take potato 1 from countertop 1", "go to diningtable 1",
                        "move potato 1 to diningtable 1"):
            env.step(do(command))
        assert env.evaluate().success, "4 steps instead of the walkthrough's 6"
    with envh.make({**base_spec(games_root), "layers": hide}, registry=registry) as env:
        env.reset(task=game.task)
        assert env.get_env_state()["world"]["objects"]["potato 1"] == "drawer 1"
        for command in game.walkthrough:
            env.step(do(command))
        assert not env.evaluate().success
    with envh.make({**base_spec(games_root), "layers": reveal}, registry=registry) as env:
        first = env.reset(task=game.task)
        assert first.observation.text.endswith("(Hint: potato 1: it is in/on the countertop 1.)")
        step = env.step(do("go to countertop 1"))
        assert "Hint: potato 1" in step.observation.text
