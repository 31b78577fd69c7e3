"""The plugin reaches envh the way any third-party plugin does: through its installed
``envh`` entry point (``pip install -e plugins/envh-example``), not by import."""

from __future__ import annotations

from importlib import metadata

import envh
import pytest


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> envh.Registry:
    monkeypatch.setenv("ENVH_PLUGINS", "envh-example")
    monkeypatch.delenv("ENVH_DISABLE_PLUGINS", raising=False)
    return envh.make_plugin_manager()


def test_the_distribution_declares_the_entry_point() -> None:
    (ep,) = [e for e in metadata.entry_points(group="envh") if e.name == "example"]
    assert ep.value == "envh_example.hooks" and ep.dist is not None and ep.dist.name == "envh-example"


def test_discovery_loads_it(registry: envh.Registry) -> None:
    assert registry.failures == []
    (info,) = [p for p in registry.loaded if p.name == "example"]
    assert (info.distribution, info.version) == ("envh-example", "0.1.0")
    assert "corridor" in registry.bridges() and "alias" in registry.component_kinds()


def test_a_spec_uses_both_contributions(registry: envh.Registry) -> None:
    spec = {"bridge": "corridor", "layers": [
        {"kind": "alias", "aliases": {"r": {"tool": "move", "args": {"direction": "right"}}}},
        {"kind": "budget", "max_steps": 10}]}
    with envh.make(spec, registry=registry) as env:
        env.reset(task=envh.TaskRef(suite="corridor", instance_id="1"))
        assert [t.name for t in env.tools()] == ["move", "r"]
        for _ in range(2):
            resp = env.step(envh.Action(tool="r"))
        assert not resp.terminated
        resp = env.step(envh.Action(tool="r"))
        assert resp.terminated and resp.reward == 1.0 and env.evaluate().success
        assert resp.info["envh"][0]["action"] == "rewritten"


def test_disabling_the_plugin_removes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVH_DISABLE_PLUGINS", "envh-example")
    reg = envh.make_plugin_manager()
    with pytest.raises(envh.errors.UnknownNameError, match="Unknown bridge 'corridor'"):
        reg.bridge("corridor")
