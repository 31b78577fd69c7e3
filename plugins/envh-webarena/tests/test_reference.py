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


@pytest.fixture(scope="module")
def crowded_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo catalogue plus 35 look-alike shirts that outrank the goal's shirt for its
    own title (so the reference must page), and synthetic instructions (goal options as a
    name → value mapping, one goal per option combination)."""
    import copy
    import json

    from envh_webarena.demo import webshop_catalogue as demo

    folder = demo.write_catalogue(tmp_path_factory.mktemp("webshop-crowded"))
    shirt = next(p for p in demo.PRODUCTS if p["asin"] == "B0TSHIRT01")
    decoys = []
    for k in range(35):
        d = copy.deepcopy(shirt)
        d.update(asin=f"B0DECOY{k:03d}", query="decoys", product_category="Decoys",
                 full_description="men's cotton crew neck t-shirt " * 3, small_description=["crew neck t-shirt"])
        decoys.append(d)
    products = [p for p in demo.PRODUCTS if p["asin"] != "B0TSHIRT01"] + decoys + [shirt]
    attributes = {**demo.ATTRIBUTES, "B0TSHIRT01": {
        **demo.ATTRIBUTES["B0TSHIRT01"], "instruction": "i want a machine wash cotton t-shirt for men",
        "instruction_attributes": ["machine wash", "cotton"]}}
    (folder / "items_shuffle_test.json").write_text(json.dumps(products))
    (folder / "items_ins_v2_test.json").write_text(json.dumps(attributes))
    return str(folder)


def test_reference_pages_to_a_product_outranked_by_look_alikes(crowded_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=crowded_data)
    task = next(t for t in env.list_tasks("test")
                if env.site.catalogue.goals[int(t.instance_id)]["asin"] == "B0TSHIRT01")
    env.reset(task=task)
    assert "b0tshirt01" not in env.site.search("men's cotton crew neck t-shirt")[:10]
    texts = [a.args["action"] for a in env.reference_actions()]
    assert "click[next >]" in texts
    resp = replay(env, env.reference_actions())
    assert resp.reward == pytest.approx(1.0) and env.evaluate().metrics["asin"] == "B0TSHIRT01"


def test_reference_reads_synthetic_goal_options_by_name(crowded_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=crowded_data, human_goals=False)
    goals = env.site.catalogue.goals
    shirts = [i for i, g in enumerate(goals) if g["asin"] == "B0TSHIRT01"]
    assert len(shirts) == 9 and all(isinstance(goals[i]["goal_options"], dict) for i in shirts)
    for i in shirts:
        env.reset(task=TaskRef(suite="webshop", split="test", instance_id=str(i)))
        resp = replay(env, env.reference_actions())
        assert resp.reward == pytest.approx(1.0), goals[i]["goal_options"]
        assert env.evaluate().metrics["options"] == goals[i]["goal_options"]


def test_no_reference_when_the_goals_product_cannot_score_one(crowded_data) -> None:
    """A goal naming an option its product does not offer: no plan scores 1, so none is
    offered (a cascade then falls back to its probe instead of rejecting every candidate)."""
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=crowded_data, num_products=1000)  # its own copy of the shop
    i = next(i for i, g in enumerate(env.site.catalogue.goals) if g["asin"] == "B0TSHIRT01")
    env.site.catalogue.goals[i]["goal_options"] = ["purple", "large"]
    env.reset(task=TaskRef(suite="webshop", split="test", instance_id=str(i)))
    assert env.reference_actions() is None
