"""The cascade's reference replay: at several episode seeds, and judged by the verdict (a
refused step the verdict does not need is not a failure)."""

from __future__ import annotations

from envh import Action, TaskRef
from envh_rigger import cascade
from envh_rigger.journal import Journal
from envh_rigger.run import RigConfig, rig

TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")


def _blocker(seeds):
    return [{"kind": "contract", "id": "seed-blocker", "cls": "rig_policies:SeedBlocker", "config": {"seeds": seeds}}]


def test_a_candidate_breaking_the_reference_at_some_seeds_only_is_rejected(registry):
    """Blocking stop in episode 5 only passed the single replay at seed 0."""
    at_zero = cascade.check({"bridge": "toy24"}, _blocker([5]), TASK, registry=registry, seeds=[0])
    assert at_zero.ok, at_zero  # what one replay at seed 0 saw
    checked = cascade.check({"bridge": "toy24"}, _blocker([5]), TASK, registry=registry)
    assert not checked.ok and checked.stage == "unsolvable" and "seed 5" in checked.message, checked
    assert checked.reference == "replayed: fails at seed 5"
    fine = cascade.check({"bridge": "toy24"}, _blocker([cascade.REPLAY_SEEDS + 3]), TASK, registry=registry)
    assert fine.ok and fine.reference.startswith(f"replayed: the reference still wins at {cascade.REPLAY_SEEDS}")


def test_the_loop_replays_at_the_seeds_its_validation_plays(registry, tmp_path):
    """Round 1's validation plays seeds 1000, 1001, ...: a candidate blocking the reference in
    episode 1003 is rejected free, before any of them is played."""
    cfg = RigConfig(spec={"bridge": "toy24"}, tasks="medium/1,2,6,6", out=str(tmp_path / "s"), policy="coin",
                    designer="writer", target="sr:0.4-0.6", rounds=1, workers=1,
                    designer_options={"cls": "rig_policies:SeedBlocker", "config": {"seeds": [1003]},
                                      "trusted": True})
    summary = rig(cfg, registry=registry)
    attempts = [e["attempt"] for e in Journal(tmp_path / "s").events(kind="attempt")]
    assert attempts and all(a["verdict"] == "invalid" and a["result"] is None for a in attempts), attempts
    assert "seed 1003" in attempts[0]["reason"] and summary["usage"]["rollouts"] == 5  # the observation only


def test_a_refused_step_the_verdict_does_not_need_is_not_a_failure(registry):
    """The replay goes on past a blocked step and the verdict decides: blocking ``reset`` (a
    tool the reference never needs) is harmless, blocking every ``combine`` is not."""
    no_reset = [{"kind": "contract", "id": "no-reset", "code": (
        "def filter_action(action, state, memo):\n"
        "    if action.tool == 'reset':\n"
        "        return Block(reason='no starting over')\n"
        "    return None\n")}]
    assert cascade.check({"bridge": "toy24"}, no_reset, TASK, registry=registry).ok
    no_combine = [{"kind": "contract", "id": "no-combine", "code": (
        "def filter_action(action, state, memo):\n"
        "    if action.tool == 'combine':\n"
        "        return Block(reason='no combining')\n"
        "    return None\n")}]
    broken = cascade.check({"bridge": "toy24"}, no_combine, TASK, registry=registry)
    assert not broken.ok and broken.stage == "unsolvable" and "no combining" in broken.message, broken


def test_replay_passes_over_a_blocked_step_and_asks_the_verdict(registry):
    import envh

    plan_with_extra = None
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        plan_with_extra = [Action(tool="reset"), *env.unwrapped.reference_actions()]
    layers = [{"kind": "contract", "id": "no-reset", "code": (
        "def filter_action(action, state, memo):\n"
        "    if action.tool == 'reset':\n"
        "        return Block(reason='no starting over')\n"
        "    return None\n")}]
    with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        assert cascade.replay_reference(env, plan_with_extra) == (True, "")
