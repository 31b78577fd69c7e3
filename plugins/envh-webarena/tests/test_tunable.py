"""Tunable difficulty for WebShop (the goal's attribute count) and MiniWoB++ (a task ladder):
the tasks drawn are of the asked difficulty, are played on the real sites (WebShop's
catalogue format, MiniWoB++ pages in Chromium) and scored by their own verifiers, and the
curriculum layer moves through them."""

from __future__ import annotations

import random
import re

import envh
import pytest
from envh import Action, TaskRef, errors
from envh_webarena.axtree import find_bid
from envh_webarena.tunable import MINIWOB_LEVELS, goal_requirements

TRAIN = {"train": [0, None]}


@pytest.fixture(scope="module")
def shop(webshop_data):
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=webshop_data, split="train", split_ranges=TRAIN)
    yield env
    env.close()


def buy(env, task: TaskRef) -> float:
    goal = env.site.catalogue.goals[int(task.instance_id)]
    env.reset(task=task)
    plan = [f"search[{goal['query']}]", f"click[{goal['asin'].lower()}]",
            *[f"click[{o}]" for o in goal["goal_options"]], "click[buy now]"]
    for text in plan:
        resp = env.step(Action(tool="act", args={"action": text}))
        assert not resp.info.get("error"), resp.info
    return resp.reward


@pytest.mark.parametrize(("wanted", "counts"), [(1, {1}), (3, {3}), (4, {4}), (8, {4}), (2, {1})])
def test_webshop_draws_goals_with_the_asked_requirement_count(shop, wanted: int, counts: set[int]) -> None:
    goals = shop.site.catalogue.goals
    assert sorted(goal_requirements(g) for g in goals) == [1, 3, 3, 4]  # the fixture catalogue
    tasks = {shop.task_for({"goal_attributes": wanted}, random.Random(seed)) for seed in range(12)}
    assert {goal_requirements(goals[int(t.instance_id)]) for t in tasks} == counts
    assert all(t.split == "train" for t in tasks)


def test_webshop_goals_of_each_count_are_bought_for_full_reward(shop) -> None:
    assert set(shop.tunable_parameters()) == {"goal_attributes"}
    for wanted in (1, 3, 4):
        task = shop.task_for({"goal_attributes": wanted}, random.Random(0))
        assert buy(shop, task) == pytest.approx(1.0) and shop.evaluate().success


@pytest.mark.parametrize("params", [{"goal_attributes": 0}, {"goal_attributes": 9}, {"goal_attributes": "3"},
                                    {"goal_attributes": 2.0}, {"attributes": 2}])
def test_webshop_bad_values_are_refused(shop, params) -> None:
    with pytest.raises(errors.EnvhError):
        shop.task_for(params, random.Random(0))


def test_webshop_without_train_goals_says_so(webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=webshop_data, split_ranges={"test": [0, None]})
    try:
        with pytest.raises(errors.EnvError, match="train split has no goals"):
            env.task_for({"goal_attributes": 2}, random.Random(0))
    finally:
        env.close()


def test_the_curriculum_layer_raises_the_goal_requirements_on_webshop(webshop_data) -> None:
    spec = {"bridge": "webshop", "config": {"data": webshop_data, "split": "train", "split_ranges": TRAIN}, "layers": [{
        "kind": "curriculum", "training": True, "anchor": 0.0,
        "params": {"goal_attributes": {"range": [1, 4], "init": 1, "step": 3}},
        "policy": {"window": 1, "floor": 0.0, "ceiling": 0.5, "early": False}}]}
    seen = []
    with envh.make(spec) as env:
        bridge = env.unwrapped
        for _ in range(2):
            result = env.reset(seed=0)
            task = bridge.task
            seen.append((result.info["curriculum"]["params"]["goal_attributes"],
                         goal_requirements(bridge.site.catalogue.goals[int(task.instance_id)])))
            assert buy(bridge, task) == pytest.approx(1.0)
    assert seen == [(1, 1), (4, 4)]


# -- MiniWoB++ -------------------------------------------------------------------------------
def test_the_miniwob_ladder_names_registered_tasks_once() -> None:
    from envh_webarena.miniwob import registered_tasks

    names = [t for level in MINIWOB_LEVELS for t in level]
    assert len(names) == len(set(names)) and set(names) <= set(registered_tasks())
    # difficulty variants keep MiniWoB's order along the ladder
    level = {t: n for n, tasks in enumerate(MINIWOB_LEVELS, 1) for t in tasks}
    for family in (["click-tab-2-easy", "click-tab-2-medium", "click-tab-2", "click-tab-2-hard"],
                   ["choose-date-easy", "choose-date-medium", "choose-date-nodelay", "choose-date"],
                   ["click-checkboxes", "click-checkboxes-large", "click-checkboxes-soft", "click-checkboxes-transfer"],
                   ["email-inbox-noscroll", "email-inbox", "email-inbox-nl-turk"],
                   ["book-flight-nodelay", "book-flight"], ["social-media-some", "social-media-all"]):
        ranks = [level[t] for t in family]
        assert ranks == sorted(ranks), family


@pytest.fixture(scope="module")
def wob():
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv()
    yield env
    env.close()


def test_each_miniwob_level_draws_its_tasks_and_they_run(wob) -> None:
    for n, tasks in enumerate(MINIWOB_LEVELS, 1):
        drawn = {wob.task_for({"level": n}, random.Random(seed)).instance_id for seed in range(20)}
        assert drawn <= set(tasks) and len(drawn) >= 3
        task = wob.task_for({"level": n}, random.Random(1))
        first = wob.reset(task=task, seed=1).observation
        assert first.data["goal"] and not wob.evaluate().success


def test_a_level_one_draw_is_solved_on_the_real_page(wob) -> None:
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-button", "book-flight"])
    try:
        # level 1 has click-button; level 3 has neither, and 1 and 5 are equally near: the easier
        assert {env.task_for({"level": n}, random.Random(0)).instance_id for n in (1, 2, 3)} == {"click-button"}
        assert env.task_for({"level": 4}, random.Random(0)).instance_id == "book-flight"
        first = env.reset(task=env.task_for({"level": 1}, random.Random(0)), seed=5).observation
        label = re.findall(r'"([^"]+)"', first.data["goal"])[0]
        resp = env.step(Action(tool="click", args={"bid": find_bid(first.text, "button", label)}))
        assert resp.terminated and env.evaluate().success
    finally:
        env.close()
    with pytest.raises(errors.EnvhError):
        wob.task_for({"level": 6}, random.Random(0))
