"""The playground under the secure default: a spec's own code runs jailed whatever the spec
says about itself, and host files a spec names are refused (moved here with the UI from
core's secure-default attacks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from envh import BridgeInfo, ComponentKind, hookimpl
from envh.components.contract import CodeContract
from envh.errors import SpecError
from envh.plugins.manager import make_plugin_manager
from envh_ui.playground import Playground, refuse_files


def _code_contracts(env: object) -> list[CodeContract]:
    """Every CodeContract of a stack, chain legs included."""
    found: list[CodeContract] = []
    todo = [env]
    while todo:
        layer = todo.pop()
        if isinstance(layer, CodeContract):
            found.append(layer)
        legs = vars(layer).get("legs") if hasattr(layer, "__dict__") else None
        if legs:
            todo.extend(legs[1:])
        inner = getattr(layer, "inner", None)
        if inner is not None:
            todo.append(inner)
    return found


def test_the_playground_builds_untrusted_and_refuses_classes_outside_plugins() -> None:
    pg = Playground()
    try:
        text = ("bridge: toy24\ntrust: trusted\nlayers:\n  - kind: contract\n    trust: trusted\n"
                "    code: |\n      def filter_observation(observation, state, memo):\n"
                "          return observation.text.upper()\n")
        answer = pg.new(text, "")
        assert "session" in answer, answer
        (env,) = pg.envs.values()
        assert [c.trust for c in _code_contracts(env)] == ["untrusted"]
        refused = pg.new("bridge: toy24\nlayers:\n  - kind: contract\n    cls: 'os:system'\n", "")
        assert "not a contract class of an installed plugin" in refused["error"]
    finally:
        pg.close()


def test_the_playground_refuses_a_bridge_config_naming_a_file_in_its_cwd(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "private").mkdir()
    (tmp_path / "questions").write_text("uid,question,answer\n1,secret question,42\n")
    registry = make_plugin_manager(entry_points=False, plugins=[_DataPlugin()])
    with pytest.raises(SpecError) as refused:  # OfficeQA's case (`data`, `corpus`) with a bridge of this test's
        refuse_files({"bridge": "datatoy", "config": {"questions": "questions", "corpus": "private"}},
                     registry=registry)
    assert "questions" in str(refused.value)


class _DataPlugin:
    """A third party's bridge and component kind, each declaring a data path."""

    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="datatoy", factory="envh.bridges.toy24:Toy24Env",
                           data_paths=("{questions}", "{corpus}"))]

    @hookimpl
    def envh_component_kinds(self) -> list[ComponentKind]:
        return [ComponentKind(name="logged", spec_type="envh.components.budget:BudgetSpec",
                              factory="envh.components.budget:build", data_paths=("rw:{log}",))]


def test_the_playground_refuses_every_declared_data_path_however_it_looks(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A key a bridge or kind declares in ``data_paths`` names a file even as a bare word
    that exists nowhere yet (a layer may create it); an undeclared bare word is data."""
    monkeypatch.chdir(tmp_path)
    registry = make_plugin_manager(entry_points=False, plugins=[_DataPlugin()])
    for spec in ({"bridge": "datatoy", "config": {"questions": "q"}},
                 {"bridge": "toy24", "layers": [{"kind": "logged", "log": "audit"}]},
                 {"bridge": "toy24", "layers": [{"kind": "chain", "legs": [{"bridge": "datatoy",
                                                                            "config": {"questions": "q"}}]}]}):
        with pytest.raises(SpecError):
            refuse_files(spec, registry=registry)
    refuse_files({"bridge": "datatoy", "config": {"split": "test"}}, registry=registry)
    refuse_files({"bridge": "toy24", "layers": [{"kind": "logged"}]}, registry=registry)
    with pytest.raises(SpecError):  # undeclared, but it reads as a path
        refuse_files({"bridge": "datatoy", "config": {"split": "./test"}}, registry=registry)
