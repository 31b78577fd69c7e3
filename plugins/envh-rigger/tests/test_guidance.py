"""The continuous guidance template and the designer's magnitude search between list entries."""

from __future__ import annotations

import envh
from envh import Action, TaskRef
from envh_rigger.designers.base import Attempt, DesignContext
from envh_rigger.designers.template import TemplateDesigner
from envh_rigger.guidance import Guide
from envh_rigger.targets import parse_target

TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
WRONG = Action(tool="combine", args={"i": 0, "j": 1, "op": "sub"})


def _play(layers, n=12):
    with envh.make({"bridge": "toy24", "layers": layers}) as env:
        env.reset(task=TASK, seed=0)
        for _ in range(n):
            if env.step(WRONG).terminated:
                break
        return env.unwrapped.evaluate().success


def test_guide_at_full_rate_solves_for_any_policy_and_at_zero_changes_nothing(registry):
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        assert Guide().magnitudes(env, TASK)  # Toy24 has a reference: the solver's plan
        full, none = Guide().instantiate(env, TASK, 1.0), Guide().instantiate(env, TASK, 0.0)
    assert _play(full) and not _play(none)


def _ctx(registry, attempts):
    return DesignContext(task=TASK, bridge="toy24", spec={"bridge": "toy24"}, tools=[], state_schema={},
                         baseline={"success_rate": 0.0}, episodes=[], target=parse_target("sr:0.4-0.6"),
                         band=(0.4, 0.6), direction="scaffold", diagnosis={"failure_axis": "S0"},
                         attempts=attempts, feedback=None, registry=registry)


def _measured(rnd, meta, sr):
    decision = "below" if sr < 0.4 else "above" if sr > 0.6 else "in"
    return Attempt(round=rnd, layers=[], meta=meta, verdict="rejected",
                   result={"decision": decision, "success_rate": sr})


def test_a_jump_between_neighbouring_magnitudes_is_searched_with_the_knob(registry):
    name = "toy24.replay-plan"
    jump = [_measured(1, {"template": name, "index": 1}, 0.0), _measured(2, {"template": name, "index": 2}, 0.9)]
    first = TemplateDesigner().propose(_ctx(registry, jump))
    assert first.meta["knob"] == [name, 1] and first.meta["continuous"] == "guide" and 0 < first.meta["rate"] < 1
    assert [layer["kind"] for layer in first.layers] == ["stage", "contract"]
    # measured too weak at that rate: the next rate is higher, by secant, still inside (rate, 1)
    weak = _measured(3, {**first.meta}, 0.2)
    second = TemplateDesigner().propose(_ctx(registry, [*jump, weak]))
    assert first.meta["rate"] < second.meta["rate"] < 1
    strong = _measured(4, {**second.meta}, 0.8)
    third = TemplateDesigner().propose(_ctx(registry, [*jump, weak, strong]))
    assert first.meta["rate"] < third.meta["rate"] < second.meta["rate"]
