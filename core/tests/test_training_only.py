"""Training-only component kinds: a kind whose layers adapt the task distribution says so
(``ComponentKind.training_only``), and an evaluation run refuses any spec holding a layer
of it, chain legs included, before anything is played or written. Core ships no such kind,
so a test plugin contributes one (``drift``) beside one that is not (``steady``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import attrs
import envh
import pytest
from click.testing import CliRunner
from envh import ComponentKind, EnvHarness, LayerSpec, errors, hookimpl
from envh.cli import cli
from envh.plugins import set_registry
from envh.rollout.cli import register
from envh.rollout.plan import build_plan, refuse_evaluation, training_only_layers
from envh.rollout.store import TrajectoryStore


@attrs.frozen(kw_only=True)
class DriftSpec(LayerSpec):
    kind: Literal["drift"] = "drift"


@attrs.frozen(kw_only=True)
class SteadySpec(LayerSpec):
    kind: Literal["steady"] = "steady"


class Passing(EnvHarness):
    """Passes everything through: which kind it is, is all these tests need."""


def build(spec: Any, inner: Any, ctx: Any) -> Passing:
    return Passing(inner, layer_id=spec.id or f"{ctx.index}:{spec.kind}")


class TrainingOnlyPlugin:
    @hookimpl
    def envh_component_kinds(self) -> list[ComponentKind]:
        return [ComponentKind(name="drift", spec_type=DriftSpec, factory=build, training_only=True,
                              description="Adapts the task distribution (test)"),
                ComponentKind(name="steady", spec_type=SteadySpec, factory=build,
                              description="Reshapes nothing about the tasks (test)")]


@pytest.fixture
def registry():
    reg = envh.make_plugin_manager(entry_points=False, plugins=[TrainingOnlyPlugin()])
    set_registry(reg)
    yield reg
    set_registry(None)


def spec(*layers: dict[str, Any]) -> dict[str, Any]:
    return {"bridge": "toy24", "layers": list(layers)}


NESTED = spec({"kind": "steady"}, {"kind": "budget", "max_steps": 10},
              {"kind": "chain", "legs": [spec({"kind": "steady"}, {"kind": "drift"})]})


def test_no_kind_is_training_only_unless_it_says_so(registry) -> None:
    kinds = registry.component_kinds()
    assert kinds["drift"].training_only is True
    assert [name for name, kind in kinds.items() if kind.training_only] == ["drift"]
    assert not any(k.training_only for k in envh.make_plugin_manager(entry_points=False).component_kinds().values())


def test_training_only_layers_are_found_in_chain_legs_too(registry) -> None:
    data = envh.spec_to_data(envh.parse_spec(NESTED, registry), registry)
    assert training_only_layers(data, registry) == [("$.layers[2].legs[0].layers[1]", "drift")]
    top = envh.spec_to_data(envh.parse_spec(spec({"kind": "drift"}, {"kind": "drift", "id": "again"}), registry),
                            registry)
    assert training_only_layers(top, registry) == [("$.layers[0]", "drift"), ("$.layers[1]", "drift")]
    with pytest.raises(errors.CurriculumEvaluationError, match=r"drift layer at \$\.layers\[0\], \$\.layers\[1\]"):
        refuse_evaluation(top, registry)
    plain = envh.spec_to_data(envh.parse_spec(spec({"kind": "steady"}), registry), registry)
    assert training_only_layers(plain, registry) == []
    refuse_evaluation(plain, registry)


def test_the_plan_refuses_an_evaluation_through_a_training_only_kind(registry) -> None:
    for data, where in ((spec({"kind": "drift"}), r"\$\.layers\[0\]"),
                        (NESTED, r"\$\.layers\[2\]\.legs\[0\]\.layers\[1\]")):
        with pytest.raises(errors.CurriculumEvaluationError, match=f"drift layer at {where}.*--training"):
            build_plan(data, policy="random", tasks=[None], registry=registry)
        assert len(build_plan(data, policy="random", tasks=[None], k=2, registry=registry, training=True)) == 2
    assert len(build_plan(spec({"kind": "steady"}), policy="random", tasks=[None], registry=registry)) == 1


def test_envh_run_refuses_before_writing_and_plays_when_told_it_trains(registry, tmp_path: Path) -> None:
    register(cli)
    path = tmp_path / "spec.json"
    args = ["run", str(path), "--policy", "random", "-k", "2", "--max-steps", "3", "--executor", "inline", "--out"]
    for data, where in ((spec({"kind": "drift"}), "$.layers[0]"), (NESTED, "$.layers[2].legs[0].layers[1]")):
        path.write_text(json.dumps(data))
        out = tmp_path / "eval"
        refused = CliRunner().invoke(cli, [*args, str(out)])
        assert refused.exit_code == 2 and not out.exists(), refused.output
        assert f"drift layer at {where}" in refused.output, refused.output
    trained = CliRunner().invoke(cli, [*args, str(tmp_path / "train"), "--training"])
    assert trained.exit_code == 0, trained.output
    with TrajectoryStore(tmp_path / "train" / "trajectories.sqlite") as store:
        assert len(list(store.rows())) == 2
    path.write_text(json.dumps(spec({"kind": "steady"})))
    evaluated = CliRunner().invoke(cli, [*args, str(tmp_path / "steady")])
    assert evaluated.exit_code == 0, evaluated.output
