"""The corridor bridge and the alias kind pass envh's contract suites (``envh.testing``),
built through the entry point like any user's spec."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract, ComponentContract

RIGHT = Action(tool="move", args={"direction": "right"})
LEFT = Action(tool="move", args={"direction": "left"})


@pytest.fixture(autouse=True)
def registry(monkeypatch: pytest.MonkeyPatch):
    """The process-wide registry, discovered from entry points (this plugin only)."""
    monkeypatch.setenv("ENVH_PLUGINS", "envh-example")
    envh.plugins.set_registry(envh.make_plugin_manager())
    yield
    envh.plugins.set_registry(None)


class TestCorridorBridge(BridgeContract):
    @pytest.fixture
    def env_factory(self):
        return lambda: envh.make({"bridge": "corridor"})

    @pytest.fixture
    def task(self):
        return TaskRef(suite="corridor", split="default", instance_id="0")

    @pytest.fixture
    def sample_actions(self):
        return [LEFT, RIGHT, RIGHT, LEFT, RIGHT, RIGHT, RIGHT]


class TestAliasKind(ComponentContract):
    @pytest.fixture
    def base_spec(self):
        return {"bridge": "corridor"}

    @pytest.fixture
    def task(self):
        return TaskRef(suite="corridor", split="default", instance_id="2")

    @pytest.fixture
    def sample_actions(self):
        return [Action(tool="back"), RIGHT, Action(tool="fwd"), Action(tool="fwd")]

    @pytest.fixture
    def layer(self):
        return {"kind": "alias", "aliases": {"fwd": {"tool": "move", "args": {"direction": "right"}},
                                             "back": {"tool": "move", "args": {"direction": "left"}}}}


def test_corridor_tasks_and_walls() -> None:
    with envh.make({"bridge": "corridor"}) as env:
        assert [t.instance_id for t in env.list_tasks()] == ["0", "1", "2", "3"]
        env.reset()
        resp = env.step(LEFT)
        assert env.get_env_state() == {"position": 0, "goal": 4, "steps": 1, "bumps": 1}
        assert resp.observation.text.startswith("Corridor: [A . . . G]")
        # Bridge.reset refuses ids list_tasks() does not list, naming the choices
        with pytest.raises(envh.errors.UnknownNameError, match="Unknown corridor task in split 'default': '9'. "
                                                               "Choose one of: 0, 1, 2, 3"):
            env.reset(task=TaskRef(suite="corridor", instance_id="9"))


def test_alias_rejects_shadowing_and_arguments() -> None:
    with pytest.raises(envh.errors.SpecError, match=r"alias names \['move'\] shadow tools"):
        envh.make({"bridge": "corridor", "layers": [{"kind": "alias", "aliases": {"move": {"tool": "move"}}}]})
    with pytest.raises(envh.errors.SpecError, match=r"unknown key 'alias' @ \$\.layers\[0\]\.alias"):
        envh.make({"bridge": "corridor", "layers": [{"kind": "alias", "alias": {}}]})
    with envh.make({"bridge": "corridor", "layers": [
            {"kind": "alias", "aliases": {"go": {"tool": "move", "args": {"direction": "right"}}}}]}) as env:
        env.reset()
        resp = env.step(Action(tool="go", args={"far": True}))
        assert resp.info["error"]["type"] == "blocked" and "takes no arguments" in resp.observation.text
