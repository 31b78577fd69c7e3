"""The envh bridge contract suite on each web bridge (real Chromium, real sites)."""

from __future__ import annotations

import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract
from envh_webarena.demo.tasks import TASKS


class TestMiniwobContract(BridgeContract):
    seed = 4

    @pytest.fixture
    def env_factory(self):
        from envh_webarena.miniwob import MiniwobEnv

        return lambda: MiniwobEnv(tasks=["choose-list", "click-button"])

    @pytest.fixture
    def task(self) -> TaskRef:
        return TaskRef(suite="miniwob", instance_id="choose-list")

    @pytest.fixture
    def sample_actions(self) -> list[Action]:
        # seed 4's list; bids are stable for the same page and actions
        from envh_webarena.axtree import find_bid
        from envh_webarena.miniwob import MiniwobEnv

        with MiniwobEnv(tasks=["choose-list"]) as env:
            obs = env.reset(task=TaskRef(suite="miniwob", instance_id="choose-list"), seed=self.seed).observation
        item = obs.data["goal"].split("Select ")[1].split(" from")[0]
        return [Action(tool="select_option", args={"bid": find_bid(obs.text, "combobox"), "options": item}),
                Action(tool="click", args={"bid": find_bid(obs.text, "button", "Submit")})]


class TestWebshopTextContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, webshop_data):
        from envh_webarena.webshop.bridge import make_webshop

        return lambda: make_webshop(mode="text", data=webshop_data)

    @pytest.fixture
    def task(self) -> TaskRef:
        return TaskRef(suite="webshop", split="test", instance_id="0")

    @pytest.fixture
    def sample_actions(self) -> list[Action]:
        return [Action(tool="act", args={"action": a})
                for a in ("search[green tea]", "click[b0greent05]", "click[features]", "click[< prev]",
                          "click[buy now]")]


class TestWebshopBrowserContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, webshop_data):
        from envh_webarena.webshop.bridge import make_webshop

        return lambda: make_webshop(mode="browser", data=webshop_data)

    @pytest.fixture
    def task(self) -> TaskRef:
        return TaskRef(suite="webshop", split="test", instance_id="0")

    @pytest.fixture
    def sample_actions(self, env_factory) -> list[Action]:
        from envh_webarena.axtree import find_bid

        with env_factory() as env:
            obs = env.reset(task=TaskRef(suite="webshop", split="test", instance_id="0")).observation
        return [Action(tool="fill", args={"bid": find_bid(obs.text, "textbox", "Search"), "value": "green tea"}),
                Action(tool="click", args={"bid": find_bid(obs.text, "button", "Search")})]


class TestWebArenaContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, demo_sites, tmp_path):
        from envh_webarena.webarena.bridge import WebArenaEnv

        return lambda: WebArenaEnv(tasks=TASKS, sites=demo_sites["urls"], auth_dir=str(tmp_path))

    @pytest.fixture
    def task(self) -> TaskRef:
        return TaskRef(suite="webarena", split="test", instance_id="4")

    @pytest.fixture
    def sample_actions(self, demo_sites) -> list[Action]:
        forum = demo_sites["forum"].url
        return [Action(tool="goto", args={"url": f"{forum}/f/hiking"}), Action(tool="go_back", args={}),
                Action(tool="goto", args={"url": f"{forum}/f/books"}), Action(tool="stop", args={"answer": "done"})]
