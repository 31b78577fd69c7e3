"""WebShop's reference solution (text mode): the goal's own product bought with the goal's
options. Replayed through the bare bridge it scores 1 on every goal, from the start page or
from wherever the shopper stands; under a stack whose contract blocks clicks it no longer
wins, which is what the rigger's cascade rejects a candidate for."""

from __future__ import annotations

import os

import pytest
from envh import Action, TaskRef, get_registry, make

RANGES = {"test": [0, 3], "train": [3, None]}
BLOCK_CLICKS = '''
def filter_action(action, state, memo):
    if str(action.args.get("action", "")).strip().startswith("click["):
        return Block(reason="clicking is not allowed here")
    return None
'''
BLOCK_DESCRIPTION = '''
def filter_action(action, state, memo):
    if str(action.args.get("action", "")).strip() == "click[description]":
        return Block(reason="no descriptions")
    return None
'''


@pytest.fixture(scope="module")
def env(webshop_data):
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=webshop_data, split_ranges=RANGES)
    yield env
    env.close()


def tasks(env) -> list[TaskRef]:
    return [t for split in RANGES for t in env.list_tasks(split)]


def replay(env, plan: list[Action]):
    """Play ``plan`` as the cascade does: stop at the first error or block."""
    resp = None
    for action in plan:
        resp = env.step(action)
        if resp.info.get("error") or resp.info.get("blocked") or resp.terminated or resp.truncated:
            break
    return resp


def test_reference_wins_every_goal_from_the_start(env) -> None:
    all_tasks = tasks(env)
    assert len(all_tasks) >= 4
    for task in all_tasks:
        env.reset(task=task)
        goal = env.site.catalogue.goals[int(task.instance_id)]
        plan = env.reference_actions()
        assert plan, task
        texts = [a.args["action"] for a in plan]
        assert texts[0].startswith("search[") and texts[-1] == "click[buy now]"
        assert f"click[{goal['asin'].lower()}]" in texts
        state_before = env.get_env_state()
        assert state_before["page"] == "start" and state_before["steps"] == 0  # computing it took no step
        resp = replay(env, plan)
        assert not resp.info.get("error") and resp.terminated and resp.reward == pytest.approx(1.0), (task, texts)
        verdict = env.evaluate()
        assert verdict.success and verdict.metrics["asin"] == goal["asin"]
        # the options clicked are the goal's own (the shirt: navy blue, large)
        assert set(verdict.metrics["options"].values()) == set(goal["goal_options"])


def test_reference_picks_the_goal_options_not_just_any(env) -> None:
    """The shirt comes in three colours and sizes; buying it without the goal's options
    scores below 1, so a reference that skipped or guessed options would fail."""
    task = next(t for t in tasks(env) if env.site.catalogue.goals[int(t.instance_id)]["asin"] == "B0TSHIRT01")
    env.reset(task=task)
    texts = [a.args["action"] for a in env.reference_actions()]
    assert "click[navy blue]" in texts and "click[large]" in texts
    assert "click[small]" not in texts and "click[black]" not in texts
    env.reset(task=task)
    replay(env, [a for a in env.reference_actions() if a.args["action"] not in ("click[navy blue]", "click[large]")])
    assert env.evaluate().metrics["purchased"] and not env.evaluate().success


def test_reference_from_mid_episode(env) -> None:
    """From a wrong product's page, from the right product with wrong options, and from a
    results page, the reference still wins."""
    task = next(t for t in tasks(env) if env.site.catalogue.goals[int(t.instance_id)]["asin"] == "B0TSHIRT01")
    for detour in (["search[polo shirt]", "click[b0polo0002]", "click[red]"],
                   ["search[cotton t-shirt]", "click[b0tshirt01]", "click[black]", "click[small]"],
                   ["search[water bottle]"]):
        env.reset(task=task)
        for text in detour:
            assert not env.step(Action(tool="act", args={"action": text})).info.get("error"), text
        plan = env.reference_actions()
        assert plan, detour
        resp = replay(env, plan)
        assert resp.terminated and resp.reward == pytest.approx(1.0), [a.args for a in plan]
        assert env.evaluate().metrics["options"] == {"color": "navy blue", "size": "large"}


def test_no_reference_when_none_can_win(env, webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    task = tasks(env)[1]
    env.reset(task=task)
    replay(env, env.reference_actions())
    assert env.reference_actions() is None  # the episode is over
    short = make_webshop(mode="text", data=webshop_data, split_ranges=RANGES, max_steps=3)
    short.reset(task=task)
    assert short.reference_actions() is None  # search, click, options, buy need more than 3 steps
    roomy = make_webshop(mode="text", data=webshop_data, split_ranges=RANGES, max_steps=None)
    roomy.reset(task=task)
    assert roomy.reference_actions()


def spec(webshop_data: str, code: str | None) -> dict:
    layers = [] if code is None else [{"kind": "contract", "code": code}]
    return {"bridge": "webshop", "config": {"mode": "text", "data": webshop_data, "split_ranges": RANGES},
            "layers": layers}


def test_a_stack_blocking_clicks_makes_the_reference_fail(webshop_data) -> None:
    for code, solvable in ((None, True), (BLOCK_DESCRIPTION, True), (BLOCK_CLICKS, False)):
        with make(spec(webshop_data, code)) as stack:
            for task in [TaskRef(suite="webshop", split="test", instance_id=i) for i in ("0", "1", "2")]:
                stack.reset(task=task)
                plan = stack.unwrapped.reference_actions()
                assert plan
                resp = replay(stack, plan)
                won = stack.unwrapped.evaluate().success
                assert won is solvable, (code, task)
                if not solvable:
                    assert resp.info.get("error") or resp.info.get("blocked")


def test_the_rigger_cascade_rejects_a_click_blocking_candidate(webshop_data) -> None:
    try:
        from envh_rigger.cascade import check
    except ImportError:  # envh-rigger is installed by dev/setup.sh's loop over plugins/
        if os.environ.get("CI"):
            raise
        pytest.skip("envh-rigger is not installed")
    task = TaskRef(suite="webshop", split="test", instance_id="1")
    base = spec(webshop_data, None)
    blocked = check(base, [{"kind": "contract", "code": BLOCK_CLICKS}], task, registry=get_registry())
    assert not blocked.ok and blocked.stage == "unsolvable", blocked
    harmless = check(base, [{"kind": "contract", "code": BLOCK_DESCRIPTION}], task, registry=get_registry())
    assert harmless.ok and harmless.reference.startswith("replayed"), harmless
