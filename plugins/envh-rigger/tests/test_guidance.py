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


def _detour(registry):
    """An off-reference first move after which the puzzle is still solvable, and the solver's
    plan from the start (so the detour differs from its first step)."""
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        start_plan = env.unwrapped.reference_actions()
        for i in range(4):
            for j in range(4):
                for op in ("add", "mul", "sub"):
                    move = Action(tool="combine", args={"i": i, "j": j, "op": op})
                    if i == j or move == start_plan[0]:
                        continue
                    env.reset(task=TASK, seed=0)
                    env.step(move)
                    if env.unwrapped.reference_actions() is not None:
                        return move, start_plan
    raise AssertionError("no solvable detour on 1,2,6,6")


def test_guide_follows_the_reference_from_the_current_state_after_a_detour(registry):
    """The plan was fixed at the start: after the policy's own detour its "next step" named
    positions that no longer exist, and the replacements ended in bad_position errors the
    diagnosis blamed on the policy. Each replacement is now the solver's next step from
    where the episode stands."""
    detour, start_plan = _detour(registry)
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        layers = Guide().instantiate(env, TASK, 1.0, focus={"tools": ["stop"]})
    stop = Action(tool="stop")
    with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        assert "error" not in env.step(detour).info  # an unfocused detour passes
        errors, won = [], False
        for _ in range(6):
            expected = env.unwrapped.reference_actions()  # the solver from here
            resp = env.step(stop)
            errors += [resp.info["error"]] if "error" in resp.info else []
            effect = resp.info["envh"][-1]
            if resp.terminated:
                won = env.unwrapped.evaluate().success
                break
            assert effect["action"] == "rewritten" and effect["sent"] == {"tool": expected[0].tool,
                                                                         "args": dict(expected[0].args)}
    assert not errors and won


def test_guide_draws_each_replacement_with_probability_m_seeded_per_episode(registry):
    """"With probability m": the draws are per episode (a policy erring once an episode is
    helped in a fraction m of episodes, not never) and replay exactly; a higher rate replaces
    a superset of what a lower one did (shared draws, so the response is monotone in m)."""
    def replaced(rate, seeds):
        with envh.make({"bridge": "toy24"}, registry=registry) as env:
            env.reset(task=TASK, seed=0)
            layers = Guide().instantiate(env, TASK, rate, focus={"tools": ["stop"]})
        out = []
        with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
            for seed in seeds:
                env.reset(task=TASK, seed=seed)
                out.append(env.step(Action(tool="stop")).info["envh"][-1]["action"] == "rewritten")
        return out

    seeds = list(range(300))
    half = replaced(0.5, seeds)
    assert 0.42 <= sum(half) / len(seeds) <= 0.58
    assert replaced(0.5, seeds[:40]) == half[:40]  # an episode replays exactly
    low, high = replaced(0.3, seeds), replaced(0.7, seeds)
    assert all(h or not lo for lo, h in zip(low, high, strict=True)) and sum(low) < sum(half) < sum(high)
    assert not any(replaced(0.0, seeds[:50])) and all(replaced(1.0, seeds[:50]))


def test_guide_passes_actions_where_the_bridge_has_no_reference_from_here(registry):
    """A dead end (Toy24's solver finds nothing): nothing to guide toward, nothing replaced."""
    dead = TaskRef(suite="toy24", split="medium", instance_id="1,1,1,1")
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=dead, seed=0)
        assert env.unwrapped.reference_actions() is None
        layers = Guide().instantiate(env, dead, 1.0)
    with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
        env.reset(task=dead, seed=0)
        assert env.step(WRONG).info["envh"][-1]["action"] == "passed"


def test_toy24_reference_after_stop_is_nothing_left_or_no_win(registry):
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        for action in env.unwrapped.reference_actions():
            env.step(action)
        assert env.unwrapped.evaluate().success and env.unwrapped.reference_actions() == []
        env.reset(task=TASK, seed=0)
        env.step(Action(tool="stop"))
        assert env.unwrapped.reference_actions() is None  # the game is over unwon


def test_a_guided_episode_saved_and_restored_goes_on_with_the_same_draws(registry):
    """The guide's draws count decisions in its layer state: a restored episode (a stage of
    the main job's pool, a resumed rollout) continues with the same replacements, and the
    reference is asked again from the restored state, not taken from a stale cache."""
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        layers = Guide().instantiate(env, TASK, 0.5, focus={"tools": ["stop"]})
    stop = Action(tool="stop")

    def effects(env, n):
        out = []
        for _ in range(n):
            resp = env.step(stop)
            out.append(resp.info["envh"][-1]["action"])
            if resp.terminated:
                break
        return out

    for seed in range(12):
        with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
            env.reset(task=TASK, seed=seed)
            head = effects(env, 1)
            if head != ["rewritten"]:
                continue
            saved = env.save_state()
            whole = head + effects(env, 5)
        with envh.make({"bridge": "toy24", "layers": layers}, registry=registry) as env:
            env.from_state(saved)
            assert head + effects(env, 5) == whole, seed


def test_a_guide_asks_no_reference_for_actions_it_can_never_replace(registry, monkeypatch):
    """Unfocused actions and rate 0 are never replaced: asking the bridge (ALFWorld: a planner
    run) for them only cost time, at every step after the episode left the reference."""
    from envh.bridges.toy24 import Toy24Env

    calls = []
    original = Toy24Env.reference_actions
    monkeypatch.setattr(Toy24Env, "reference_actions", lambda self: calls.append(1) or original(self))
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        layers = {"zero": Guide().instantiate(env, TASK, 0.0),
                  "elsewhere": Guide().instantiate(env, TASK, 1.0, focus={"tools": ["stop"]}),
                  # focused, but the draw says pass: drawn before the reference is asked
                  "unlucky": Guide().instantiate(env, TASK, 1e-9, focus={"tools": ["combine"]})}
    for name, guide in layers.items():
        with envh.make({"bridge": "toy24", "layers": guide}, registry=registry) as env:
            env.reset(task=TASK, seed=0)
            calls.clear()
            for _ in range(4):
                env.step(Action(tool="reset"))
                env.step(WRONG)
            assert calls == [], name
