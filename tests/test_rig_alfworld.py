"""The designer loop on a real ALFWorld game (envh-rigger + envh-alfworld).

Solvability: ALFWorld's reference is the planner's walkthrough kept in the game file. The
cascade replays it through every candidate on the real AlfredTWEnv/TextWorld engine and
rejects one under which it no longer wins, at no rollout cost. A walkthrough player that
always wins cannot be pushed below the band without breaking that path, so the loop must
end without accepting anything that blocks it.
"""

from __future__ import annotations

import json
from pathlib import Path

import envh
import pytest

pytest.importorskip("alfworld")  # the repository conftest turns this skip into a failure in CI

BLOCK_TAKE = '''
def filter_action(action, state, memo):
    if str(action.args.get("command", "")).startswith("take "):
        return Block(reason="taking things is not allowed")
    return None
'''
HIDE_FEEDBACK = '''
def filter_observation(observation, state, memo):
    return Observation(text="(nothing visible)", data={})
'''


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    from envh.hostpaths import granted
    from envh_alfworld.builder import build_games
    from envh_alfworld.examples import EXAMPLE_ROOMS
    from envh_alfworld.rooms import room_from_dict

    data = tmp_path_factory.mktemp("alfworld")
    (built,) = build_games([room_from_dict(EXAMPLE_ROOMS["pick_and_place_simple"])], data)
    with granted(data):  # the caller's data (--data), for every spec the tests build on it
        yield built, {"bridge": "alfworld", "config": {"data_path": str(data), "max_steps": 30}}


def test_the_walkthrough_is_the_reference_and_a_candidate_breaking_it_is_rejected(game):
    from envh_rigger import cascade

    built, spec = game
    registry = envh.get_registry()
    with envh.make(spec) as env:
        env.reset(task=built.task, seed=0)
        plan = cascade.reference_of(env)
    assert [a.args["command"] for a in plan] == [" ".join(c.lower().split()) for c in built.walkthrough]
    broken = cascade.check(spec, [{"kind": "contract", "id": "no-take", "code": BLOCK_TAKE}], built.task,
                           registry=registry)
    assert not broken.ok and broken.stage == "unsolvable", broken
    assert "taking things is not allowed" in broken.message
    # masking what the policy sees makes the game harder, not unsolvable: the reference still wins
    masked = cascade.check(spec, [{"kind": "contract", "id": "blind", "code": HIDE_FEEDBACK}], built.task,
                           registry=registry)
    assert masked.ok and masked.reference.startswith("replayed"), masked


def test_loop_never_accepts_a_candidate_that_breaks_the_walkthrough(game, tmp_path: Path) -> None:
    from envh_rigger import cascade
    from envh_rigger.journal import Journal
    from envh_rigger.run import RigConfig, rig

    built, spec = game
    script = tmp_path / "walkthrough.json"
    script.write_text(json.dumps({built.task.instance_id: [
        {"tool": "do", "args": {"command": c}} for c in built.walkthrough]}))
    lines: list[str] = []
    summary = rig(RigConfig(
        spec=spec, tasks=f"{built.task.split}/{built.task.instance_id}", policy=f"scripted:{script}",
        policy_options={"when_done": "repeat"}, target="sr:0.0-0.5", k=2, rounds=3,
        workers=1, max_steps=20, out=str(tmp_path / "rig")), echo=lines.append)
    assert any("baseline 1.00" in line and "pressure" in line for line in lines), "\n".join(lines)
    journal = Journal(tmp_path / "rig")
    attempts = [e["attempt"] for e in journal.events(kind="attempt")]
    assert attempts
    by_spec = {a["spec_id"]: a for a in attempts if a.get("spec_id")}
    for accepted in journal.events(kind="accepted"):
        note = by_spec[accepted["spec_id"]]["cascade"]["reference"]
        with envh.make(accepted["spec"]) as env:
            env.reset(task=built.task, seed=0)
            plan = cascade.reference_of(env)  # the rest of the walkthrough from the candidate's start
            if plan is None:  # a stage off the walkthrough: nothing proves it, and the record says so
                assert note.startswith("none")
            else:
                assert note.startswith("replayed") and cascade.replay_reference(env, plan)[0]
    for a in attempts:  # rejected as unsolvable by the cascade: no rollout was spent on it
        if a["verdict"] == "invalid" and "unsolvable" in a["reason"]:
            assert a.get("result") is None
    report = Path(summary["report"]).read_text()
    assert "replays the bridge's reference solution" in report


MOVED_TO_SHELF = ["go to countertop 1", "take mug 1 from countertop 1", "go to shelf 1", "move mug 1 to shelf 1"]
NO_TAKE_FROM_SHELF = '''
def filter_action(action, state, memo):
    if str(action.args.get("command", "")).startswith("take mug 1 from shelf 1"):
        return Block(reason="nothing may be taken from the shelf")
    return None
'''


def _stage(commands):
    return {"kind": "stage", "actions": [{"tool": "do", "args": {"command": c}} for c in commands]}


def test_a_stage_off_the_walkthrough_has_the_planners_reference_from_its_state(game):
    """A stage that leaves the walkthrough (the mug carried to the shelf) had no reference:
    the candidate fell back to the probe. The planner now plans from the staged state, and
    the cascade replays that plan."""
    from envh_rigger import cascade

    built, spec = game
    registry = envh.get_registry()
    staged = {**spec, "layers": [_stage(MOVED_TO_SHELF)]}
    with envh.make(staged) as env:
        env.reset(task=built.task, seed=0)
        plan = [a.args["command"] for a in cascade.reference_of(env)]
        assert plan[0] == "take mug 1 from shelf 1" and "desk 1" in plan[-1], plan
    fine = cascade.check(spec, [_stage(MOVED_TO_SHELF)], built.task, registry=registry, seeds=[0, 1])
    assert fine.ok and fine.reference.startswith("replayed"), fine


def test_a_stage_that_breaks_solvability_is_rejected_by_the_reference_not_the_probe(game):
    """The mug staged on the shelf and taking from the shelf blocked: no way to the desk. The
    contract alone is harmless (the walkthrough never takes from the shelf); with the stage
    the planner's reference from the staged state no longer wins."""
    from envh_rigger import cascade

    built, spec = game
    registry = envh.get_registry()
    contract = {"kind": "contract", "id": "no-shelf", "code": NO_TAKE_FROM_SHELF}
    alone = cascade.check(spec, [contract], built.task, registry=registry, seeds=[0])
    assert alone.ok and alone.reference.startswith("replayed"), alone
    broken = cascade.check(spec, [_stage(MOVED_TO_SHELF), contract], built.task, registry=registry, seeds=[0])
    assert not broken.ok and broken.stage == "unsolvable" and broken.reference.startswith("replayed"), broken
    assert "nothing may be taken from the shelf" in broken.message


def test_the_planner_plans_from_any_state_and_its_plan_wins(game):
    """From the middle of a detour (the policy wandered, opened a drawer) the planner's plan
    is played on the real engine and wins; once won, nothing is left to do."""
    built, spec = game
    with envh.make(spec) as env:
        env.reset(task=built.task, seed=0)
        for c in ["go to drawer 1", "open drawer 1", "go to shelf 1"]:
            env.step(envh.Action(tool="do", args={"command": c}))
        plan = env.unwrapped.reference_actions()
        assert plan  # the walkthrough does not start with this detour: the planner plans from here
        for action in plan:
            resp = env.step(action)
            assert "error" not in resp.info, resp.info
        assert env.unwrapped.evaluate().success and env.unwrapped.reference_actions() == []


def test_a_failing_planner_is_named_and_a_stage_it_cannot_plan_from_is_rejected(game, monkeypatch):
    """The planner crashing was read as "no reference": the candidate passed on the probe and
    the report said "none". It now names the failure, and a candidate whose start has no
    reference (where the bare start has one) is rejected."""
    from envh_rigger import cascade
    from textworld.envs.pddl.logic import PddlState

    built, spec = game
    registry = envh.get_registry()
    contract = {"kind": "contract", "id": "no-shelf", "code": NO_TAKE_FROM_SHELF}

    def crash(self, infos):
        raise RuntimeError("fast-downward crashed")

    monkeypatch.setattr(PddlState, "replan", crash)
    result = cascade.check(spec, [_stage(MOVED_TO_SHELF), contract], built.task, registry=registry, seeds=[0])
    assert not result.ok and result.stage == "unsolvable", result
    assert result.reference.startswith("error:") and "fast-downward crashed" in result.message

    monkeypatch.setattr(PddlState, "replan", lambda self, infos: [])  # the planner finds no plan
    result = cascade.check(spec, [_stage(MOVED_TO_SHELF)], built.task, registry=registry, seeds=[0])
    assert not result.ok and result.stage == "unsolvable" and result.reference == "none from the candidate's start"


def test_a_policy_that_never_heats_is_diagnosed_by_the_heat_step(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real ALFWorld heat game, a policy that plays the walkthrough but skips ``heat``
    fails every episode; the game stays winnable (it could go back and heat), so each
    episode is decided by its first step off the planner's reference: the diagnosis names
    ``do:heat`` where the reference plays it, still winnable after, and nothing is fatal."""
    from envh_alfworld.builder import build_games
    from envh_alfworld.examples import EXAMPLE_ROOMS
    from envh_alfworld.rooms import room_from_dict
    from envh_rigger.divergence import replay, summary
    from envh_rigger.rollouts import Rollouts

    data = tmp_path / "alfworld"
    (built,) = build_games([room_from_dict(EXAMPLE_ROOMS["pick_heat_then_place_in_recep"])], data)
    spec = {"bridge": "alfworld", "config": {"data_path": str(data), "max_steps": 12}}
    monkeypatch.setenv("ENVH_DATA", str(data))  # the caller's data (--data)
    skipped = [c for c in built.walkthrough if not c.lower().startswith("heat ")]
    assert len(skipped) == len(built.walkthrough) - 1
    script = tmp_path / "no-heat.json"
    script.write_text(json.dumps({built.task.instance_id: [{"tool": "do", "args": {"command": c}} for c in skipped]}))
    registry = envh.get_registry()
    rollouts = Rollouts(tmp_path / "runs", policy=f"scripted:{script}", registry=registry, max_steps=12,
                        policy_options={"when_done": "repeat"})
    trajs = rollouts.run(spec, built.task, [0, 1, 2], "observe")
    assert not any(t.success for t in trajs)
    div = replay(spec, built.task, trajs, registry)
    weakest = div["weakest"]
    assert weakest["class"] == "do:heat" and weakest["side"] == "expected", div
    assert weakest["decisive"] == weakest["taken"] == 3 and weakest["fatal"] == 0
    assert all(d["expected"] == "do:heat" and d["did"] == "do:go" and d["winnable_after"] for d in div["divergences"])
    text = summary(div)
    assert text.startswith("the episodes leave the reference where the reference plays do:heat"), text
    assert "still winnable after 3 of 3" in text
