"""WebShop over a catalogue in WebShop's data format: the scripted buyer scores 1, a near
miss scores in between, text and browser modes agree, splits follow the index ranges."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from envh import Action, TaskRef, errors
from envh_webarena.axtree import find_bid

RANGES = {"test": [0, 3], "train": [3, None]}


@pytest.fixture(scope="module")
def text_env(webshop_data):
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=webshop_data, split_ranges=RANGES)
    yield env
    env.close()


@pytest.fixture(scope="module")
def browser_env(webshop_data):
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="browser", data=webshop_data, split_ranges=RANGES)
    yield env
    env.close()


def goal_for(env, asin: str) -> tuple[TaskRef, dict]:
    goals = env.site.catalogue.goals
    i = next(i for i, g in enumerate(goals) if g["asin"] == asin)
    split = "test" if i < 3 else "train"
    return TaskRef(suite="webshop", split=split, instance_id=str(i)), goals[i]


def text_plan(goal: dict, options: list[str]) -> list[str]:
    return [f"search[{goal['query']}]", f"click[{goal['asin'].lower()}]", *[f"click[{o}]" for o in options],
            "click[buy now]"]


def act(text: str) -> Action:
    return Action(tool="act", args={"action": text})


def test_text_buyer_scores_one(text_env) -> None:
    for asin in ("B0TSHIRT01", "B0BOTTLE04", "B0GREENT05"):
        task, goal = goal_for(text_env, asin)
        first = text_env.reset(task=task).observation
        assert goal["instruction_text"] in first.text and "search[<your query>]" in first.text
        for a in text_plan(goal, goal["goal_options"]):
            resp = text_env.step(act(a))
            assert not resp.info.get("error"), resp.info
        assert resp.terminated and resp.reward == pytest.approx(1.0)
        verdict = text_env.evaluate()
        assert verdict.success and verdict.metrics["asin"] == asin


def test_near_miss_scores_partially(text_env) -> None:
    task, goal = goal_for(text_env, "B0TSHIRT01")  # navy blue, large, machine wash, cotton, price
    text_env.reset(task=task)
    for a in text_plan(goal, ["navy blue", "small"]):  # the wrong size
        text_env.step(act(a))
    verdict = text_env.evaluate()
    assert not verdict.success
    # (2 attributes + 1 of 2 options + price) / (2 + 2 + 1) with the right product type
    assert verdict.score == pytest.approx(4 / 5)
    task, goal = goal_for(text_env, "B0TSHIRT01")
    text_env.reset(task=task)
    for a in ["search[polo shirt]", "click[b0polo0002]", "click[navy blue]", "click[large]", "click[buy now]"]:
        text_env.step(act(a))
    wrong_product = text_env.evaluate()
    assert 0 < wrong_product.score < verdict.score and not wrong_product.success


def test_text_mode_rejects_bad_actions(text_env) -> None:
    task, _ = goal_for(text_env, "B0GREENT05")
    text_env.reset(task=task)
    for bad in ["click[buy now]", "buy it", "search[]", "click[b0nothere]"]:
        resp = text_env.step(act(bad))
        assert resp.info["error"]["type"] == "invalid_action" and "Available actions" in resp.observation.text
    text_env.step(act("search[tea]"))
    assert text_env.step(act("search[mug]")).info["error"]  # no search box on the results page
    assert text_env.get_env_state()["page"] == "results"


def test_splits_follow_index_ranges(text_env, webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    assert [t.instance_id for t in text_env.list_tasks("test")] == ["0", "1", "2"]
    assert [t.instance_id for t in text_env.list_tasks("train")] == ["3"]
    default = make_webshop(data=webshop_data)  # WebShop's own ranges: all 4 goals fall in test (0-500)
    assert len(default.list_tasks("test")) == 4 and default.list_tasks("train") == []
    with pytest.raises(errors.UnknownNameError):
        make_webshop(data=webshop_data, split="dev")
    with pytest.raises(errors.SpecError):
        make_webshop(mode="gui", data=webshop_data)


def browser_buy(env, task: TaskRef, goal: dict, options: list[str]) -> None:
    obs = env.reset(task=task).observation
    env.step(Action(tool="fill", args={"bid": find_bid(obs.text, "textbox", "Search"), "value": goal["query"]}))
    obs = env.step(Action(tool="click", args={"bid": find_bid(obs.text, "button", "Search")})).observation
    assert "Total results" in obs.text
    obs = env.step(Action(tool="click", args={"bid": find_bid(obs.text, "link", goal["asin"])})).observation
    for option in options:
        obs = env.step(Action(tool="click", args={"bid": find_bid(obs.text, "radio", option)})).observation
        assert re.search(rf"radio '{re.escape(option)}', checked", obs.text), obs.text
    resp = env.step(Action(tool="click", args={"bid": find_bid(obs.text, "button", "Buy Now")}))
    assert resp.terminated and "Thank you for shopping" in resp.observation.text


def test_text_and_browser_modes_agree(text_env, browser_env) -> None:
    for asin, options in [("B0TSHIRT01", ["navy blue", "large"]), ("B0TSHIRT01", ["white", "large"]),
                          ("B0SHOES003", ["pink", "8"])]:
        task, goal = goal_for(text_env, asin)
        text_env.reset(task=task)
        for a in text_plan(goal, options):
            text_env.step(act(a))
        browser_buy(browser_env, task, goal, options)
        t, b = text_env.evaluate(), browser_env.evaluate()
        assert (t.success, t.score) == (b.success, b.score)
        assert t.metrics["options"] == b.metrics["options"] == dict(zip(["color", "size"], options, strict=True))
    assert browser_env.evaluate().success  # the shoes: pink, size 8


def test_reward_parts_follow_webshop_rules(text_env) -> None:
    from envh_webarena.webshop import reward

    products = text_env.site.catalogue.products
    _, goal = goal_for(text_env, "B0TSHIRT01")
    shirt = products["B0TSHIRT01"]
    full = reward.score(shirt, goal, 15.99, {"color": "navy blue", "size": "large"})
    assert full["reward"] == 1.0 and full["r_type"] == 1.0
    over_budget = reward.score(shirt, goal, 1000.0, {"color": "navy blue", "size": "large"})
    assert over_budget["reward"] == pytest.approx(4 / 5) and not over_budget["r_price"]
    # sizes match fuzzily, as in WebShop's released goal.py: "large" matches "x-large", not "small"
    assert reward.option_matches(["x-large"], {"size": "large"}) == 1
    assert reward.option_matches(["small"], {"size": "large"}) == 0
    tea = products["B0GREENT05"]
    assert reward.type_reward(tea, goal)["r_type"] < 1.0  # tea is not a shirt


def test_browser_done_pages_show_no_score_for_what_was_not_bought(browser_env) -> None:
    """A done page shows a score only as the episode's purchase: typed by ``goto`` under any
    host name for the shop, it is either the purchase (the browser sent the episode's cookie:
    recorded, the episode ends with that verdict) or shows no score and records nothing (no
    cookie under that name, or another session's page)."""
    from urllib.parse import quote

    task, goal = goal_for(browser_env, "B0TSHIRT01")
    other, _ = goal_for(browser_env, "B0SHOES003")
    info = browser_env.reset(task=task).info
    assert info["grading"]["type_score"] and "master" in info["grading"]["release"]
    port = browser_env._server().port
    best = quote('{"color": "navy blue", "size": "large"}', safe="")
    refused = [f"http://{h}:{port}/done/fixed_{task.instance_id}/B0TSHIRT01/{best}"
               for h in ["localhost", "LOCALHOST", "localhost.", "[::1]", "0.0.0.0"]]
    refused.append(f"http://127.0.0.1:{port}/done/fixed_{other.instance_id}/B0TSHIRT01/{best}")  # another session
    for url in refused:
        resp = browser_env.step(Action(tool="goto", args={"url": url}))
        assert not resp.terminated and resp.reward == 0.0, url
        assert "Your score" not in resp.observation.text and "1.0000" not in resp.observation.text, url
        assert not browser_env.evaluate().metrics["purchased"], url
    own = f"http://127.0.0.1:{port}/done/fixed_{task.instance_id}/B0TSHIRT01/{best}"
    try:  # a POST (followed to a GET, without the browser's cookie) is no way around it
        body = urllib.request.urlopen(urllib.request.Request(own, data=b"x=1", method="POST"), timeout=10)
        page = body.read().decode()
    except urllib.error.HTTPError as exc:
        page = exc.read().decode()
    assert "No purchase" in page and "Your score" not in page
    # the same address written otherwise is the episode's own shop: a typed done URL is a purchase
    for host in ["127.1", "127.0.0.1."]:
        browser_env.reset(task=task)
        resp = browser_env.step(Action(tool="goto", args={"url": f"http://{host}:{port}/done/fixed_{task.instance_id}"
                                                                 f"/B0TSHIRT01/{best}"}))
        shown = "Your score" in resp.observation.text
        assert shown == resp.terminated == browser_env.evaluate().metrics["purchased"], host
        assert resp.reward == browser_env.evaluate().score == (1.0 if shown else 0.0), host
    browser_env.reset(task=task)
    browser_buy(browser_env, task, goal, ["white", "large"])  # a purchase by Buy Now
    verdict = browser_env.evaluate()
    assert verdict.metrics["options"] == {"color": "white", "size": "large"} and not verdict.success


@pytest.fixture(scope="module")
def shared_value_env(tmp_path_factory):
    """Text mode over the demo catalogue where the t-shirt offers "large" under two option
    names (size: large, small; fit: large, regular) and the goal asks for large and small."""
    import json

    from envh_webarena.demo.webshop_catalogue import write_catalogue
    from envh_webarena.webshop.bridge import make_webshop

    folder = write_catalogue(tmp_path_factory.mktemp("webshop-shared-value"))
    products = json.loads((folder / "items_shuffle_test.json").read_text())
    tee = next(p for p in products if p["asin"] == "B0TSHIRT01")
    tee["customization_options"] = {name: [{"value": v, "image": None} for v in values]
                                    for name, values in [("size", ["Large", "Small"]), ("fit", ["Large", "Regular"])]}
    (folder / "items_shuffle_test.json").write_text(json.dumps(products))
    human = json.loads((folder / "items_human_ins.json").read_text())
    human["B0TSHIRT01"][0]["instruction_options"] = ["large", "small"]
    (folder / "items_human_ins.json").write_text(json.dumps(human))
    env = make_webshop(mode="text", data=str(folder), split_ranges=RANGES)
    yield env
    env.close()


def test_text_click_on_a_value_of_two_options_sets_the_last(shared_value_env) -> None:
    """WebShop's text_to_clickable keeps the last radio button of a value (page order): after
    click[large], click[small] the purchase is {fit: large, size: small}, which
    goal.py:get_reward scores 1.0 for goal options [large, small] (the first option
    name would give {size: small} and 0.8). The value is listed once."""
    env = shared_value_env
    task, goal = goal_for(env, "B0TSHIRT01")
    env.reset(task=task)
    clicks: list[str] = []
    for a in text_plan(goal, ["large", "small"]):
        resp = env.step(act(a))
        assert not resp.info.get("error"), resp.info
        if a == f"click[{goal['asin'].lower()}]":  # on the item page
            clicks = list(resp.observation.data["available_actions"])
    verdict = env.evaluate()
    assert verdict.metrics["options"] == {"fit": "large", "size": "small"}
    assert verdict.success and verdict.score == pytest.approx(1.0)
    assert clicks.count("click[large]") == 1 and clicks[-3:] == ["click[large]", "click[small]", "click[regular]"]


def test_attributes_tab_hidden_unless_asked(text_env, webshop_data) -> None:
    """The Attributes tab lists what the reward's attribute part matches: hidden by default
    in both modes (WebShop's app and text env, ``show_attrs=False``), shown with
    ``show_attrs``; a hidden or unknown tab is no page."""
    from envh_webarena.webshop.bridge import make_webshop

    task, goal = goal_for(text_env, "B0TSHIRT01")
    text_env.reset(task=task)
    for a in text_plan(goal, [])[:2]:
        obs = text_env.step(act(a)).observation
    assert "click[reviews]" in obs.data["available_actions"]
    assert "click[attributes]" not in obs.data["available_actions"] and "Attributes" not in obs.text
    assert text_env.step(act("click[attributes]")).info["error"]["type"] == "invalid_action"
    shown = make_webshop(mode="text", data=webshop_data, split_ranges=RANGES, show_attrs=True)
    try:
        shown.reset(task=task)
        for a in [*text_plan(goal, [])[:2], "click[attributes]"]:
            resp = shown.step(act(a))
            assert not resp.info.get("error"), resp.info
        assert "machine wash [SEP] cotton [SEP] short sleeve" in resp.observation.text
    finally:
        shown.close()


def test_attributes_tab_over_http_follows_the_episode(text_env) -> None:
    """Browser mode's server: an episode opened without show_attrs gets no Attributes button
    and a 404 for the tab (any unknown tab too); one opened with it gets both."""
    from urllib.parse import quote

    from envh_webarena.httpserve import LocalServer
    from envh_webarena.webshop.site import handler_for

    site = text_env.site
    task, _ = goal_for(text_env, "B0TSHIRT01")
    server = LocalServer(handler_for(site))

    def get(path: str, cookie: str) -> tuple[int, str]:
        request = urllib.request.Request(server.url + path, headers={"Cookie": f"envh_episode={cookie}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    session, none = f"fixed_{task.instance_id}", quote("{}", safe="")
    item = f"/item_page/{session}/B0TSHIRT01/tee/1/{none}"
    sub = f"/item_sub_page/{session}/B0TSHIRT01/tee/1/{{}}/{none}".format
    try:
        for cookie, shown in [("hidden-episode", False), ("no-episode", False), ("shown-episode", True)]:
            if cookie != "no-episode":
                site.open_episode(cookie, session, **({"show_attrs": True} if shown else {}))
            status, page = get(item, cookie)
            assert status == 200 and ">Reviews</button>" in page
            assert (">Attributes</button>" in page) == shown, cookie
            status, page = get(sub("Attributes"), cookie)
            assert (status == 200 and "machine wash" in page) == shown, cookie
            status, page = get(sub("Sizes"), cookie)
            assert status == 404 and "machine wash" not in page
    finally:
        site.close_episode("hidden-episode")
        site.close_episode("shown-episode")
        server.close()


def test_browser_item_page_shows_the_attributes_tab_only_when_asked(browser_env, webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    shown = make_webshop(mode="browser", data=webshop_data, split_ranges=RANGES, show_attrs=True)
    try:
        for env, visible in [(browser_env, False), (shown, True)]:
            task, _ = goal_for(env, "B0TSHIRT01")
            env.reset(task=task)
            item = f"{env._server().url}/item_page/fixed_{task.instance_id}/B0TSHIRT01/tee/1/%7B%7D"
            obs = env.step(Action(tool="goto", args={"url": item})).observation
            assert "button 'Reviews'" in obs.text and ("button 'Attributes'" in obs.text) == visible
    finally:
        shown.close()
