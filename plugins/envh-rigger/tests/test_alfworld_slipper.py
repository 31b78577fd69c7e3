"""The slipper on ALFWorld (real TextWorld engine, games built here by envh-alfworld's
builder): a policy that skips ``heat`` steps fails heat tasks and solves the others; the
replay against the reference names ``do:heat``, and the loop lands each heat task in its
band with the guide focused on that class."""

from __future__ import annotations

import importlib.util
import os

import envh
import pytest
from envh.plugins import set_registry
from envh.rollout import TrajectoryStore
from envh_rigger.divergence import class_focus, replay, summary
from envh_rigger.journal import Journal
from envh_rigger.pool import HarnessPool
from envh_rigger.rollouts import Rollouts
from envh_rigger.run import RigConfig, rig

TYPES = ("pick_heat_then_place_in_recep", "pick_and_place_simple", "pick_clean_then_place_in_recep")
HEAT = "pick_heat_then_place_in_recep"
HEAT_SEEDS = (1, 2)  # sampled heat rooms besides the example: heat at depth 3 and 4


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """The example rooms of three task types and two sampled heat rooms, built into a fresh
    ALFWorld data root: (root, example games by task type, the three heat games)."""
    if not all(importlib.util.find_spec(m) for m in ("alfworld", "textworld", "fast_downward")):
        message = "alfworld (with textworld[pddl] and fast-downward) is not installed: dev/setup.d/alfworld.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from envh.hostpaths import granted
    from envh_alfworld.builder import build_games
    from envh_alfworld.examples import EXAMPLE_ROOMS
    from envh_alfworld.rooms import room_from_dict
    from envh_alfworld.sampling import sample_room

    root = tmp_path_factory.mktemp("alfworld-data")
    built = build_games([room_from_dict(EXAMPLE_ROOMS[t]) for t in TYPES]
                        + [sample_room(seed, HEAT) for seed in HEAT_SEEDS], root)
    examples = {g.task_type: g for g in built[:len(TYPES)]}
    with granted(root):  # the caller's data (--data), for every spec the tests build on it
        yield root, examples, [examples[HEAT], *built[len(TYPES):]]


@pytest.fixture
def registry():
    import alfworld_policies  # on sys.path through conftest
    import envh_rigger.hooks
    from envh_alfworld import hooks as alfworld_hooks

    reg = envh.make_plugin_manager(entry_points=False,
                                   plugins=[envh_rigger.hooks, alfworld_hooks, alfworld_policies])
    set_registry(reg)
    yield reg
    set_registry(None)


def _spec(root) -> dict:
    return {"bridge": "alfworld", "config": {"data_path": str(root)}}


def _plans(games) -> dict[str, list[str]]:
    return {g.task.instance_id: list(g.walkthrough) for g in games}


def _read(out) -> tuple[list[dict], list]:
    """The run's journal events and its stored episodes (both stores closed again)."""
    journal, store = Journal(out), TrajectoryStore(out)
    try:
        return journal.events(), list(store.query(run_id="rig"))
    finally:
        journal.close()
        store.close()


def _replaced(traj) -> list[tuple[str, str]]:
    """(proposed, executed) commands of the steps a layer changed."""
    pairs = [(s.proposed.args["command"], s.executed.args["command"]) for s in traj.steps if s.proposed and s.executed]
    return [(p, e) for p, e in pairs if p != e]


def test_the_heat_skipper_fails_only_heat_and_is_diagnosed_by_do_heat(registry, games, tmp_path):
    """It solves the tasks without a heat step and loses every heat episode; the replay
    names the reference's ``do:heat`` (played as ``do:go``), decisive in every failure, and
    no other class decides any."""
    root, built, _heat = games
    ro = Rollouts(tmp_path / "ro", policy="heat-skipper", registry=registry, max_steps=8,
                  policy_options={"plans": _plans(built.values())})
    try:
        wins = {t: [x.success for x in ro.run(_spec(root), built[t].task, list(range(4)), "observe")] for t in TYPES}
        assert wins == {HEAT: [False] * 4, "pick_and_place_simple": [True] * 4,
                        "pick_clean_then_place_in_recep": [True] * 4}
        heat = built[HEAT].task
        trajs = ro.run(_spec(root), heat, list(range(4)), "observe")
    finally:
        ro.close()
    div = replay(_spec(root), heat, trajs, registry)
    assert div["replayed"] == 4
    assert div["weakest"]["class"] == "do:heat" and div["weakest"]["side"] == "expected"
    assert div["expected"]["do:heat"]["decisive"] == div["expected"]["do:heat"]["taken"] == 4
    assert all(row["decisive"] == 0 for cls, row in div["expected"].items() if cls != "do:heat")
    assert all(d["expected"] == "do:heat" and d["did"] == "do:go" and d["depth"] == 3 for d in div["divergences"])
    assert "where the reference plays do:heat" in summary(div) and "4 of 4" in summary(div)


def test_the_loop_lands_an_alfworld_policy_that_skips_heat(registry, games, tmp_path):
    """On three heat games the base loses every episode (sr 0, below the band [0.3, 0.7]).
    Each diagnosis names ``do:heat``; the guide (the template designer's continuous knob)
    focused on the reference's heat steps lands each task, and in the accepted candidates'
    episodes every replacement is a heat where the policy had moved on: nothing else was
    touched, and exactly the episodes with one were won."""
    root, _examples, heats = games
    out = tmp_path / "rig"
    steps = max(len(g.walkthrough) for g in heats) + 2
    result = rig(RigConfig(spec=_spec(root), tasks=";".join(g.task.instance_id for g in heats), out=str(out),
                           max_steps=steps, workers=1, policy="heat-skipper", policy_options={"plans": _plans(heats)},
                           designer="template:guide", target="sr:0.3-0.7"), registry=registry)
    events, stored = _read(out)

    def of(key: str, kind: str) -> list[dict]:
        return [e for e in events if e["task"] == key and e["kind"] == kind]

    for game in heats:
        [baseline] = of(str(game.task), "baseline")
        diagnosis = baseline["diagnosis"]
        assert baseline["stats"]["success_rate"] == 0.0 and baseline["check"]["decision"] == "below"
        assert diagnosis["divergence"]["weakest"]["class"] == "do:heat", diagnosis["summary"]
        assert diagnosis["divergence"]["weakest"]["side"] == "expected"
        assert diagnosis["summary"].startswith("the episodes leave the reference where the reference plays do:heat")
    attempts = [(e["task"], e["attempt"]["meta"], e["attempt"]["reason"]) for e in events if e["kind"] == "attempt"]
    assert result["stops"] == {str(g.task): "accepted" for g in heats}, attempts
    pool = HarnessPool.open(out)
    for game in heats:
        # from the journal: the pool is content-addressed, and tasks landed by the same guide
        # layer share one spec (and one pool entry)
        key = str(game.task)
        [accepted] = of(key, "accepted")
        [attempt] = [e["attempt"] for e in of(key, "attempt") if e["attempt"]["verdict"] == "accepted"]
        assert attempt["meta"]["focus"] == "diverges:do:heat" and attempt["meta"]["template"] == "guide"
        assert 0.3 <= attempt["result"]["success_rate"] <= 0.7
        assert pool.load_spec(accepted["spec_id"]) == accepted["spec"]
        [guide] = [layer for layer in accepted["spec"]["layers"] if "guidance" in str(layer.get("cls"))]
        assert guide["config"]["focus"] == {"expected": class_focus("do:heat")}
        sid = accepted["spec_id"][:16]
        played = [t for t in stored if t.key.startswith((f"{key}|{sid}|validate:", f"{key}|{sid}|confirm:"))]
        assert any(t.success for t in played) and not all(t.success for t in played)
        for t in played:  # one replacement per won episode, a heat where the policy moved on; none in a lost one
            replaced = _replaced(t)
            assert all(e.startswith("heat ") and not p.startswith("heat ") for p, e in replaced), replaced
            assert len(replaced) == int(t.success), (t.key, replaced)
    assert (out / "report.md").read_text().count("where the reference plays do:heat") >= len(heats)
