"""Diagnosis against the reference: a policy that slips on one action class is named by that
class (with counts), predicates true of every failure are flagged, and the guide focused on
the class lands the task."""

from __future__ import annotations

import envh
import pytest
from envh_rigger.divergence import action_class, class_focus, replay, summary
from envh_rigger.journal import Journal
from envh_rigger.pool import HarnessPool
from envh_rigger.rollouts import Rollouts
from envh_rigger.run import RigConfig, rig

SPEC = {"bridge": "toy24"}


def _task(instance: str) -> envh.TaskRef:
    return envh.TaskRef(suite="toy24", split="medium", instance_id=instance)


def _play(registry, tmp_path, spec, instance, n=10, **options):
    ro = Rollouts(tmp_path / f"r{abs(hash(str(spec))) % 10**6}", policy="slipper", registry=registry, max_steps=12,
                  policy_options=options)
    return ro.run(spec, _task(instance), list(range(n)), "observe")


def test_action_classes_keep_word_arguments_only():
    assert action_class(envh.Action(tool="combine", args={"i": 0, "j": 1, "op": "sub"})) == "combine:sub"
    assert action_class(envh.Action(tool="stop", args={})) == "stop"
    assert action_class({"tool": "act", "args": {"command": "heat egg 1 with microwave 1"}}) == "act:heat"
    assert action_class({"tool": "bash", "args": {"cmd": "/usr/bin/python -m pytest"}}) == "bash"
    focus = class_focus("combine:sub")
    assert focus["tools"] == ["combine"] and '"sub"' in focus["pattern"]


def test_a_policy_slipping_on_sub_is_diagnosed_by_that_class(registry, tmp_path):
    """The slipper plays the solver's move but ``add`` for ``sub`` with probability 0.8: the
    replay names ``combine:sub`` (where the reference plays it) with every such step fatal,
    and ``combine:add`` steps the reference asked for never lose the task."""
    trajs = _play(registry, tmp_path, SPEC, "1,6,8,10")
    failed = [t for t in trajs if not t.success]
    assert len(failed) >= 5
    div = replay(SPEC, _task("1,6,8,10"), trajs, registry)
    assert div["weakest"]["class"] == "combine:sub" and div["weakest"]["side"] == "expected"
    sub, add = div["expected"]["combine:sub"], div["expected"]["combine:add"]
    assert div["replayed"] == min(len(failed), 8)  # at most MAX_EPISODES failures are replayed
    k = div["replayed"]
    assert sub["fatal"] == sub["decisive"] == sub["taken"] == k and add["decisive"] == 0 and add["taken"] >= k
    assert all(d["expected"] == "combine:sub" and d["did"] == "combine:add" and d["depth"] == 1
               for d in div["divergences"])
    assert "combine:sub" in summary(div) and f"{k} of {k}" in summary(div)


def test_the_guide_focused_on_the_expected_class_replaces_only_there(registry, tmp_path):
    """At rate 1 a guide whose ``expected`` focus is ``combine:sub`` wins every episode (each
    slip is answered by the reference's ``sub``); focused on ``div`` (which this puzzle's
    reference never plays) it changes nothing."""
    def guided(op):
        return {**SPEC, "layers": [{"kind": "contract", "cls": "envh_rigger.guidance:GuideContract",
                                    "config": {"rate": 1.0, "focus": {"expected": class_focus(f"combine:{op}")}}}]}

    base = sum(t.success for t in _play(registry, tmp_path, SPEC, "1,6,8,10"))
    assert base <= 5
    assert sum(t.success for t in _play(registry, tmp_path, guided("sub"), "1,6,8,10")) == 10
    assert sum(t.success for t in _play(registry, tmp_path, guided("div"), "1,6,8,10")) == base


@pytest.mark.parametrize("instance", ["1,6,8,10", "2,6,10,10", "3,6,8,12"])
def test_the_loop_lands_a_policy_that_slips_on_one_class(registry, tmp_path, instance):
    """Three puzzles whose reference plays ``sub``: the diagnosis names it, flags
    ``stops-early`` (true of every failure) as uninformative, and the guide focused on
    ``combine:sub`` lands each in [0.4, 0.6] (was: diagnosed "stopped without reaching the
    goal", the guide focused on ``stop``, 1 of 3 landed)."""
    out = tmp_path / "rig"
    summary_ = rig(RigConfig(spec=SPEC, tasks=f"medium/{instance}", out=str(out), max_steps=12, workers=1,
                             policy="slipper", target="sr:0.4-0.6"), registry=registry)
    assert summary_["stops"] == {f"toy24/medium/{instance}": "accepted"}, summary_
    [baseline] = Journal(out).events(kind="baseline")
    diagnosis = baseline["diagnosis"]
    assert diagnosis["divergence"]["weakest"]["class"] == "combine:sub"
    assert "stops-early" in diagnosis["uninformative"]
    assert diagnosis["summary"].startswith("the task is lost where the reference plays combine:sub")
    [entry] = HarnessPool.open(out).entries()
    assert entry["meta"]["focus"] == "diverges:combine:sub"
    [guide] = [layer for layer in HarnessPool.open(out).load_spec(entry["spec_id"])["layers"]
               if "guidance" in str(layer.get("cls"))]
    assert guide["config"]["focus"] == {"expected": class_focus("combine:sub")}
    assert "the task is lost where the reference plays combine:sub" in (out / "report.md").read_text()


def test_a_policy_that_stops_at_once_is_named_by_its_stop(registry, tmp_path):
    """The ``rate`` policy at rate 0 stops at once: the reference's first step (``combine``)
    and the policy's ``stop`` lose every episode alike; a different tool is named by what the
    policy did, so the guide replaces its stops wherever they show."""
    ro = Rollouts(tmp_path / "stop", policy="rate", registry=registry, max_steps=12, policy_options={"rates": {4: 0.0}})
    trajs = ro.run(SPEC, _task("1,2,6,6"), list(range(5)), "observe")
    div = replay(SPEC, _task("1,2,6,6"), trajs, registry)
    assert div["weakest"]["class"] == "stop" and div["weakest"]["side"] == "taken"
    assert "reference's combine:add played as stop" in summary(div)
