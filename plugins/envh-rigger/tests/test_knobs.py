"""Continuous knobs: observation masking at a rate (pressure) and guidance focused where the
weakness shows (scaffold), played on the real Toy24 bridge and through the real loop."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh_rigger import cascade
from envh_rigger.designers.base import Attempt, DesignContext
from envh_rigger.designers.template import TemplateDesigner
from envh_rigger.guidance import Guide
from envh_rigger.masking import Mask
from envh_rigger.pool import HarnessPool
from envh_rigger.rollouts import Rollouts
from envh_rigger.run import RigConfig, rig
from envh_rigger.targets import parse_target
from envh_rigger.weakness import weakness_focus

TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
WRONG = Action(tool="combine", args={"i": 0, "j": 1, "op": "sub"})  # off the solver's plan


@pytest.fixture
def adaptive_registry(registry):
    """The rigger's registry with envh-adaptive's kinds (curriculum, workspace) as well."""
    import envh_adaptive.hooks

    registry.register(envh_adaptive.hooks, name="adaptive")
    return registry


def _mask(registry, rate):
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        return Mask().instantiate(env, TASK, rate)


def _start(registry, layers, seed):
    with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
        obs = env.reset(task=TASK, seed=seed).observation
        return obs.text, list(obs.data["numbers"])


def test_mask_rate_zero_is_transparent_and_one_hides_every_word(registry):
    plain = _start(registry, [], 0)
    assert _start(registry, _mask(registry, 0.0), 0) == plain
    text, numbers = _start(registry, _mask(registry, 1.0), 0)
    assert numbers == ["?"] * 4 and not any(ch.isalnum() for ch in text)


def test_mask_is_seeded_per_episode_and_hides_about_a_fraction_m(registry):
    layers = _mask(registry, 0.3)
    assert _start(registry, layers, 7) == _start(registry, layers, 7)  # an episode replays exactly
    with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:  # one stack, many episodes
        starts = [(o.text, list(o.data["numbers"])) for o in
                  (env.reset(task=TASK, seed=seed).observation for seed in range(200))]
    assert starts[7] == _start(registry, layers, 7)
    assert len({tuple(n) for _, n in starts}) > 5  # episodes see different masks
    hidden = sum(n.count("?") for _, n in starts) / (4 * len(starts))
    assert 0.24 <= hidden <= 0.36, hidden
    # later observations are masked too, with fresh draws
    with envh.make({"bridge": "toy24", "layers": _mask(registry, 1.0)}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        after = env.step(WRONG).observation
    assert set(after.data["numbers"]) == {"?"}


def test_mask_leaves_the_task_solvable_and_the_verdict_sealed(registry):
    """The cascade replays the bridge's reference through the candidate: masking what the
    policy sees changes no transition, so even m = 1 is solvable."""
    checked = cascade.check({"bridge": "toy24"}, _mask(registry, 1.0), TASK, registry=registry, reference=[])
    assert checked.ok, checked


def _ctx(registry, attempts, *, direction="pressure", baseline=1.0, episodes=()):
    return DesignContext(task=TASK, bridge="toy24", spec={"bridge": "toy24"}, tools=[], state_schema={},
                         baseline={"success_rate": baseline}, episodes=list(episodes),
                         target=parse_target("sr:0.4-0.6"), band=(0.4, 0.6), direction=direction,
                         diagnosis={"failure_axis": "O"}, attempts=attempts, feedback=None, registry=registry)


def _measured(rnd, meta, sr):
    decision = "below" if sr < 0.4 else "above" if sr > 0.6 else "in"
    return Attempt(round=rnd, layers=[], meta=meta, verdict="rejected",
                   result={"decision": decision, "success_rate": sr})


def test_mask_rate_is_searched_on_the_measured_response(registry):
    designer = TemplateDesigner("mask")
    first = designer.propose(_ctx(registry, []))
    assert first.meta["knob"] == ["mask"] and first.meta["rate"] == 0.5
    strong = _measured(1, first.meta, 0.06)  # far too hard: the secant from (0, 1.0) aims lower
    second = designer.propose(_ctx(registry, [strong]))
    assert 0.075 <= second.meta["rate"] < 0.5
    weak = _measured(2, second.meta, 0.9)  # too easy: between the two rates
    third = designer.propose(_ctx(registry, [strong, weak]))
    assert second.meta["rate"] < third.meta["rate"] < 0.5
    fitted = Attempt(round=3, layers=[], meta=third.meta, verdict="rejected",
                     result={"decision": "in", "success_rate": 0.5})
    assert designer.propose(_ctx(registry, [strong, weak, fitted])) is None  # nothing left on the knob


def test_pressure_between_two_list_entries_stacks_the_mask(registry):
    name = "toy24.hide-number"
    jump = [_measured(1, {"template": name, "index": 0}, 0.9), _measured(2, {"template": name, "index": 1}, 0.1)]
    proposal = TemplateDesigner().propose(_ctx(registry, jump))
    assert proposal.meta["knob"] == [name, 0] and proposal.meta["continuous"] == "mask"
    assert [layer.get("cls", "code") for layer in proposal.layers][-1] == "envh_rigger.masking:ObservationMask"


def test_loop_places_a_reader_in_the_band_with_the_mask(registry, tmp_path):
    """True success under mask m is (1 - m)^4: the accepted rate's true value must be in the band."""
    cfg = RigConfig(spec={"bridge": "toy24"}, tasks="medium/1,2,6,6", out=str(tmp_path / "mask"), policy="reader",
                    designer="template:mask", target="sr:0.4-0.6", max_steps=10, workers=1)
    summary = rig(cfg, registry=registry)
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "accepted"}, summary
    [entry] = HarnessPool.open(tmp_path / "mask").entries()
    rate = entry["meta"]["rate"]
    assert 0.4 <= (1 - rate) ** 4 <= 0.6, rate


def _play(layers, actions):
    with envh.make({"bridge": "toy24", "layers": layers}) as env:
        env.reset(task=TASK, seed=0)
        for a in actions:
            if env.step(a).terminated:
                break
        return [h["op"] for h in env.get_env_state()["history"]], env.unwrapped.evaluate().success


def test_focused_guide_replaces_only_the_actions_where_the_weakness_is(registry):
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        plan = [a.args.get("op") for a in env.unwrapped.reference_actions() if a.tool == "combine"]
        spread = Guide().instantiate(env, TASK, 1.0)
        focused = Guide().instantiate(env, TASK, 1.0, focus={"tools": ["stop"]})
    stop = Action(tool="stop")
    # unfocused, the first off-reference action (a wrong combine) is replaced
    assert _play(spread, [WRONG])[0] == plan[:1]
    # focused on stopping, wrong combines pass untouched and the premature stop is replaced
    ops, _ = _play(focused, [WRONG, stop])
    assert ops[0] == "sub" and len(ops) <= 2
    # stop after stop: the focused guide walks the reference to a win without touching combines
    assert _play(focused, [stop] * 6)[1] is True


def test_focus_comes_from_the_predicate_that_shows_in_the_failures(registry, tmp_path):
    """The rate policy's losers stop at once without solving (stops-early shows only in
    failures): guidance concentrates on stop calls."""
    rollouts = Rollouts(tmp_path / "r", policy="rate", registry=registry, policy_options={"rates": {4: 0.5}},
                        max_steps=10)
    try:
        trajs = rollouts.run({"bridge": "toy24"}, TASK, list(range(12)), "observe")
    finally:
        rollouts.close()
    assert 0 < sum(t.success for t in trajs) < len(trajs)
    focus, predicate = weakness_focus(_ctx(registry, [], direction="scaffold", baseline=0.5, episodes=trajs))
    assert predicate == "stops-early" and "stop" in focus["tools"]
    proposal = TemplateDesigner("guide").propose(_ctx(registry, [], direction="scaffold", baseline=0.5,
                                                      episodes=trajs))
    assert proposal.meta["focus"] == "stops-early" and "stop" in proposal.layers[0]["config"]["focus"]["tools"]


def test_a_designer_that_is_not_trusted_cannot_name_a_class_to_import(registry, tmp_path):
    """A contract naming a Python class is imported in this process: a designer that is not
    trusted may name only classes of installed plugins (the mask's); any other
    module is refused before it is imported, free."""
    cfg = RigConfig(spec={"bridge": "toy24"}, tasks="medium/1,2,6,6", out=str(tmp_path / "cls"), policy="coin",
                    designer="writer", designer_options={"cls": "logging.handlers:SocketHandler"},
                    target="sr:0.4-0.6", rounds=1, workers=1)
    rig(cfg, registry=registry)
    from envh_rigger.journal import Journal

    attempts = [e["attempt"] for e in Journal(tmp_path / "cls").events(kind="attempt")]
    assert attempts and all(a["verdict"] == "invalid" and a["result"] is None for a in attempts)
    assert "not a contract class of an installed plugin" in attempts[0]["reason"]


def test_a_designer_that_is_not_trusted_may_not_name_host_paths(adaptive_registry):
    """A curriculum's audit log or a workspace's library, chain legs included, would be
    written or read by the rigger's own process."""
    layers = [{"kind": "curriculum", "params": {"size": {"range": [3, 4], "init": 3}}, "training": True,
               "audit": "/etc/cron.d/x"},
              {"kind": "chain", "legs": [{"bridge": "toy24", "layers": [{"kind": "workspace", "library": "/root"}]}]}]
    checked = cascade.check({"bridge": "toy24"}, layers, TASK, registry=adaptive_registry, trusted=False)
    assert not checked.ok and checked.stage == "spec"
    assert "layers[0].audit" in checked.message and "layers[1].legs[0].layers[0].library" in checked.message
    assert cascade.host_paths([{"kind": "curriculum", "params": {}}], registry=adaptive_registry) == []  # none named


def test_host_paths_are_one_list_in_core_for_the_rigger_and_the_components(adaptive_registry):
    """The rigger restated core's refusal (curriculum ``audit``, workspace ``library``): a
    host-path option added to one list would be missed by the other check. Both read what
    each kind declares in ``data_paths``."""
    from envh import errors
    from envh.plugins.records import ComponentKind

    assert not hasattr(cascade, "HOST_PATHS") and cascade.host_paths is envh.host_paths
    layers = {"curriculum": {"kind": "curriculum", "params": {"size": {"range": [3, 4], "init": 3}}, "training": True},
              "workspace": {"kind": "workspace"}}
    kinds: dict[str, ComponentKind] = adaptive_registry.component_kinds()
    declared = {name: [e.removeprefix("rw:")[1:-1] for e in kinds[name].data_paths if "{" in e] for name in layers}
    assert declared == {"curriculum": ["audit"], "workspace": ["library"]}
    for kind, options in declared.items():
        for option in options:
            layer = {**layers[kind], option: "/tmp/envh-rigger-host-path"}
            assert cascade.host_paths([layer], "layers", adaptive_registry) == [f"layers[0].{option}"]
            with pytest.raises(errors.SpecError, match="untrusted spec may not name a host path"):
                envh.make({"bridge": "toy24", "layers": [layer]}, registry=adaptive_registry, trust="untrusted")
