"""The curriculum kind on the real Toy24 bridge: a policy whose success depends on the
puzzle size is driven into the band and held there; parameters change only at episode
boundaries; breaker, kill switch, audit replay, resume, and the refusals."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh_adaptive.components.curriculum import CurriculumLayer
from envh_adaptive.curriculum import Curriculum, ParamBounds, ParamPlan
from hypothesis import given, settings
from hypothesis import strategies as st

#: These tests choose the audit logs and libraries themselves: a spec that names a host path
#: needs the caller's trust (the default refuses it), so they build trusted, and say
#: ``trust="untrusted"`` where the refusal is what they test.
make = functools.partial(envh.make, trust="trusted")

#: how often the scripted player solves a puzzle of each size
SKILL = {3: 1.0, 4: 0.75, 5: 0.2}


def spec(**layer):
    base = {"kind": "curriculum", "training": True, "params": {"size": {"range": [3, 5], "init": 3}},
            "policy": {"window": 20, "floor": 0.6, "ceiling": 0.85, "breaker": 3}, "anchor": 0.0}
    return {"bridge": "toy24", "layers": [{**base, **layer}]}


def layer_of(env) -> CurriculumLayer:
    return next(e for e in envh.iter_layers(env) if isinstance(e, CurriculumLayer))


def play(env, episodes: int, rng: random.Random, skill=SKILL) -> list[int]:
    """Scripted player: solves with probability skill[size], else stops at once."""
    sizes = []
    for i in range(episodes):
        result = env.reset(seed=i)
        size = result.info["curriculum"]["params"]["size"]
        sizes.append(size)
        plan = env.unwrapped.solve() if rng.random() < skill[size] else [Action(tool="stop")]
        for action in plan:
            env.step(action)
    return sizes


def test_a_policy_is_driven_into_the_band_and_held_there(tmp_path: Path) -> None:
    # window 40: the rate's sd at p=0.75 is 0.07, so a window leaves the band [0.6, 0.85]
    # about 1 time in 12 (and comes back after one window); 20 would wobble twice as often
    with make(spec(audit=str(tmp_path / "audit.jsonl"), policy={"window": 40})) as env:
        sizes = play(env, 400, random.Random(0))
    # 11 straight wins weigh as much as 35 of 40 (the weakest full window above 0.85), so
    # the first window closes early
    assert sizes[:12] == [3] * 11 + [4]
    settled = sizes[120:]
    assert settled.count(4) / len(settled) >= 0.8, settled
    decisions = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()
                 if json.loads(line)["type"] == "decision"]
    assert decisions[0]["decision"] == "harder" and decisions[0]["after"] == {"size": 4}
    assert "after 11 of 40 episodes" in decisions[0]["reason"] and decisions[0]["window"]["episodes"] == 11
    assert all(abs(d["after"]["size"] - d["before"]["size"]) <= 1 for d in decisions)  # bounded by step
    assert all(d["reason"] for d in decisions)


@settings(max_examples=25, deadline=None)
@given(outcomes=st.lists(st.tuples(st.booleans(), st.integers(0, 4)), min_size=1, max_size=30),
       window=st.integers(1, 4))
def test_parameters_never_change_mid_episode(outcomes, window) -> None:
    with make(spec(policy={"window": window, "floor": 0.5, "ceiling": 0.5})) as env:
        layer = layer_of(env)
        for i, (win, steps) in enumerate(outcomes):
            params = env.reset(seed=i).info["curriculum"]["params"]
            for action in (env.unwrapped.solve() if win else [Action(tool="reset")] * steps):
                env.step(action)
                assert layer.curriculum.values == params or layer.current["params"] == params
                assert layer.current["params"] == params


def test_the_breaker_restores_the_safe_default(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    s = spec(params={"size": {"range": [3, 5], "init": 5}},
             policy={"window": 5, "floor": 0.6, "breaker": 2, "early": False}, audit=str(audit))
    with make(s) as env:
        play(env, 11, random.Random(1), skill={3: 0.0, 4: 0.0, 5: 0.0})
        assert layer_of(env).curriculum.values == {"size": 4}  # Toy24's safe default
    kinds = [json.loads(line)["decision"] for line in audit.read_text().splitlines()
             if json.loads(line)["type"] == "decision"]
    assert kinds == ["easier", "breaker"]


def test_early_windows_need_as_much_evidence_as_a_full_one_and_grace_follows_a_harder_move() -> None:
    bounds = ParamBounds(name="level", low=1, high=10, default=1)
    cur = Curriculum({"level": ParamPlan(bounds=bounds, low=1, high=10, init=5)}, window=20, floor=0.6,
                     ceiling=0.85, breaker=3)
    # 8 straight wins are weaker evidence than 18 of 20 (Wilson lower bounds 0.68 < 0.70); 9 are not
    assert [cur.end_episode(True) for _ in range(8)] == [None] * 8
    d = cur.end_episode(True)
    assert d is not None and d["decision"] == "harder" and d["window"]["episodes"] == 9 and cur.values["level"] == 6
    # the first window after a harder move: failures do not close it early, and a full
    # window below the floor holds (and counts toward the breaker)
    assert [cur.end_episode(False) for _ in range(19)] == [None] * 19
    d = cur.end_episode(False)
    assert d is not None and (d["decision"], cur.values["level"], cur.below) == ("hold", 6, 1)
    assert "first window after a harder move" in d["reason"]
    # out of grace: 0 of 5 steps back at once (0.4^5 = 0.010 ≤ the 0.025 of the test's level
    # spent by the fifth look); 0 of 4 does not
    assert [cur.end_episode(False) for _ in range(4)] == [None] * 4
    d = cur.end_episode(False)
    assert d is not None and (d["decision"], d["window"]["episodes"], cur.values["level"]) == ("easier", 5, 5)
    # the breaker counts full windows only: early steps back lead to the easiest level,
    # where windows run full, and the breaker trips after its third full window below the floor
    decisions = [r for r in (cur.end_episode(False) for _ in range(4 * 5 + 2 * 20)) if r is not None]
    assert [d["decision"] for d in decisions] == ["easier"] * 4 + ["hold", "breaker"]
    assert decisions[-1]["window"]["episodes"] == 20 and cur.values["level"] == 1
    # a window in the band is never closed early, whatever its length so far
    cur = Curriculum({"level": ParamPlan(bounds=bounds, low=1, high=10, init=5)}, window=20)
    outcomes = [True, True, True, False] * 5  # 0.75
    assert [cur.end_episode(x) for x in outcomes[:-1]] == [None] * 19
    assert cur.end_episode(outcomes[-1])["decision"] == "hold"  # type: ignore[index]
    classic = Curriculum({"level": ParamPlan(bounds=bounds, low=1, high=10, init=5)}, early=False, grace=False)
    assert [classic.end_episode(True) for _ in range(19)] == [None] * 19


def test_kill_switch_freezes_at_safe_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    with make(spec(adaptive=False)) as env:
        assert set(play(env, 45, random.Random(2))) == {4}
    monkeypatch.setenv("ENVH_CURRICULUM_FREEZE", "1")
    with make(spec()) as env:
        assert set(play(env, 45, random.Random(2))) == {4}


def test_audit_replay_reproduces_the_parameter_sequence_and_resume_continues(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with make(spec(audit=str(audit), policy={"window": 10})) as env:
        first = play(env, 50, random.Random(3))
        layer = layer_of(env)
    state = layer.curriculum.state()  # after close: the 50th episode is recorded too
    assert state["episodes"] == 50
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    episodes = [r for r in records if r["type"] == "episode"]
    assert [r["params"]["size"] for r in episodes] == first
    replayed = Curriculum(layer.curriculum.plans, window=10)
    seen = []
    for record in episodes:
        seen.append(replayed.values["size"])
        replayed.end_episode(record["success"])
    assert seen == first and replayed.state() == state
    with make(spec(audit=str(audit), policy={"window": 10})) as env:  # resume from the log
        assert layer_of(env).curriculum.state() == state
        assert env.reset(seed=0).info["curriculum"]["episode"] == 51


def test_the_curriculum_draws_with_its_own_seed_not_the_envs() -> None:
    def tasks(env_seed_base: int, layer_seed: int) -> list[str]:
        with make(spec(seed=layer_seed)) as env:
            return [env.reset(seed=env_seed_base + i).info["envh"][-1]["task"] for i in range(5)]

    assert tasks(0, 7) == tasks(1000, 7) != tasks(0, 8)


def test_anchor_episodes_keep_the_requested_task() -> None:
    task = envh.TaskRef(suite="toy24", split="hard", instance_id="1,5,5,5")
    with make(spec(anchor=1.0)) as env:
        result = env.reset(task=task, seed=0)
        assert result.info["curriculum"]["anchored"] and "[0] 1, [1] 5, [2] 5, [3] 5" in result.observation.text


@pytest.mark.parametrize(("layer", "message"), [
    ({"training": False}, "must not stand between a policy and a fixed evaluation set"),
    ({"params": {"size": {"range": [3, 5], "init": 9}}}, "init 9 for 'size' is outside"),
    ({"params": {"size": {"range": [1, 5]}}}, "outside the bridge's bounds"),
    ({"params": {"rooms": {}}}, "Unknown tunable parameter 'rooms'. Choose one of: max_number, size"),
    ({"params": {}}, "1 to 5 parameters"),
    ({"policy": {"type": "coach"}}, "A coach curriculum policy needs 'code'"),
    ({"policy": {"type": "teacher"}}, "Unknown curriculum policy type 'teacher'. Choose one of: coach, threshold"),
    ({"policy": {"code": "def coach(stats): pass"}}, "Unknown curriculum policy options ['code'] for type"),
    ({"policy": {"windwo": 5}}, "Unknown curriculum policy options"),
    ({"policy": {"early": "yes"}}, "early must be true or false"),
    ({"policy": {"type": "coach", "code": "def coach(stats): pass", "grace": True}}, "Unknown curriculum policy"),
])
def test_bad_curricula_are_refused_with_the_reason(layer, message) -> None:
    with pytest.raises(errors.EnvhError, match=message.replace("(", r"\(").replace("[", r"\[")):
        make(spec(**layer))


def test_a_bridge_without_tunable_parameters_is_refused() -> None:
    class Plain(envh.bridges.toy24.Toy24Env):
        def tunable_parameters(self):
            return {}

    reg = envh.make_plugin_manager(entry_points=False)
    from envh.spec import BuildContext
    from envh_adaptive.components.curriculum import CurriculumSpec, build

    with pytest.raises(errors.SpecError, match="declares no tunable parameters"):
        build(CurriculumSpec(params={"size": {}}, training=True), Plain(),
              BuildContext(registry=reg, index=0, make=lambda s: make(s, registry=reg)))


@pytest.mark.parametrize("layer", [
    {"policy": {"window": 2.5}}, {"policy": {"window": True}}, {"policy": {"floor": "0.5"}},
    {"policy": {"floor": float("nan")}}, {"policy": {"ceiling": float("inf")}}, {"anchor": float("nan")},
    {"anchor": 1.5}, {"params": {"size": {"init": 4.5}}}, {"params": {"size": {"range": [3, 4, 5]}}},
    {"params": {"size": 4}}, {"params": {"size": {"range": ["3", 5]}}}, {"params": {"size": {"stpe": 2}}},
])
def test_mistyped_curriculum_values_are_refused_not_rounded_or_crashed_on(layer) -> None:
    with pytest.raises(errors.SpecError):
        make(spec(**layer))


@pytest.mark.parametrize("line", ['[1]', '5', '{"type": "episode", "success": "false"}', '\udcff'])
def test_a_tampered_audit_log_is_refused_on_resume(tmp_path: Path, line: str) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.write_text(line + "\n" + json.dumps({"type": "episode", "success": True}) + "\n", errors="surrogateescape")
    with pytest.raises(errors.StateError):
        make(spec(audit=str(audit)))


def test_a_saved_state_must_name_exactly_the_planned_parameters() -> None:
    with make(spec()) as env:
        env.reset(seed=0)
        layer = layer_of(env)
        saved = layer.layer_state()
        for values in ({}, {"size": 4, "max_number": 9}, {"size": 9}, {"size": 4.0}):
            bad = {**saved, "curriculum": {**saved["curriculum"], "values": values}}
            with pytest.raises(errors.StateError):
                layer.load_layer_state(bad)
        layer.load_layer_state(saved)
        assert layer.curriculum.values == saved["curriculum"]["values"]


def test_the_runner_refuses_to_evaluate_through_a_curriculum_unless_told_it_trains(tmp_path: Path) -> None:
    import subprocess
    import sys

    from envh.rollout.store import TrajectoryStore

    def envh_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                              capture_output=True, text=True, timeout=180)

    nested = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 10}, {"kind": "chain", "legs": [
        spec(anchor=0.0)]}]}
    for data, where in ((spec(), "$.layers[0]"), (nested, "$.layers[1].legs[0].layers[0]")):
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(data))
        out = tmp_path / "eval"
        args = ["run", str(path), "--policy", "random", "-k", "3", "--max-steps", "3", "--executor", "inline", "--out"]
        refused = envh_cli(*args, str(out))
        assert refused.returncode != 0 and not out.exists()
        assert f"curriculum layer at {where}" in refused.stderr, refused.stderr
    trained = envh_cli(*args, str(tmp_path / "train"), "--training")
    assert trained.returncode == 0, trained.stderr
    with TrajectoryStore(tmp_path / "train" / "trajectories.sqlite") as store:
        assert len(list(store.rows())) == 3


def test_resume_refuses_a_log_written_under_another_configuration(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with make(spec(audit=str(audit), policy={"window": 10})) as env:
        play(env, 40, random.Random(5))
    for policy in ({"window": 12}, {"window": 10, "ceiling": 0.95}, {"window": 10, "early": False}):
        with pytest.raises(errors.StateError, match="another configuration"):
            make(spec(audit=str(audit), policy=policy))
    with make(spec(audit=str(audit), policy={"window": 10})):
        pass
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    edited = [r for r in records if r["type"] == "episode"][5]
    edited["params"] = {"size": 5 if edited["params"]["size"] != 5 else 3}  # not the size the curriculum chose
    audit.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(errors.StateError, match="ran with"):
        make(spec(audit=str(audit), policy={"window": 10}))


def test_a_kill_between_the_episode_and_decision_lines_resumes_and_writes_the_decision(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with make(spec(audit=str(audit), policy={"window": 10})) as env:
        play(env, 40, random.Random(6))
        state = layer_of(env).curriculum.state()
    lines = audit.read_text().splitlines()
    last_decision = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "decision")
    assert json.loads(lines[last_decision - 1])["type"] == "episode"
    torn = lines[:last_decision]  # killed after the episode line, before its decision line
    audit.write_text("\n".join(torn) + "\n")
    with make(spec(audit=str(audit), policy={"window": 10})) as env:
        resumed = layer_of(env).curriculum.state()
    rewritten = audit.read_text().splitlines()
    assert json.loads(rewritten[-1]) == json.loads(lines[last_decision])
    after = json.loads(lines[last_decision])["after"]
    assert resumed["values"] == after and (state["episodes"], state["values"]) >= (resumed["episodes"], {})


def test_the_kill_switch_works_on_a_resumed_run_and_frozen_windows_replay_frozen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    audit = tmp_path / "audit.jsonl"
    with make(spec(audit=str(audit), policy={"window": 10})) as env:
        play(env, 30, random.Random(7), skill={3: 1.0, 4: 1.0, 5: 1.0})
        assert layer_of(env).curriculum.values == {"size": 5}
    monkeypatch.setenv("ENVH_CURRICULUM_FREEZE", "1")
    with make(spec(audit=str(audit), policy={"window": 10})) as env:  # switched on at resume
        assert set(play(env, 20, random.Random(8))) == {4}
    decisions = [json.loads(line)["decision"] for line in audit.read_text().splitlines()
                 if json.loads(line)["type"] == "decision"]
    assert decisions[-2:] == ["frozen", "frozen"]
    monkeypatch.delenv("ENVH_CURRICULUM_FREEZE")
    with make(spec(audit=str(audit), policy={"window": 10})) as env:  # and off again
        assert layer_of(env).curriculum.episodes == 50


def test_the_runners_plan_refuses_a_curriculum_unless_the_run_trains() -> None:
    from envh.rollout.plan import build_plan

    with pytest.raises(errors.CurriculumEvaluationError, match=r"curriculum layer at \$.layers\[0\]"):
        build_plan(spec(), policy="random", tasks=[None])
    assert len(build_plan(spec(), policy="random", tasks=[None], k=2, training=True)) == 2
    assert len(build_plan({"bridge": "toy24"}, policy="random", tasks=[None])) == 1


def test_one_audit_log_serves_one_live_curriculum_and_a_torn_line_is_dropped(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with make(spec(audit=str(audit), policy={"window": 5})) as env:
        play(env, 12, random.Random(9))
        with pytest.raises(errors.StateError, match="in use by another live curriculum"):
            make(spec(audit=str(audit), policy={"window": 5}))
    state = layer_of(env).curriculum.state()
    with open(audit, "a") as f:
        f.write('{"type": "episode", "episo')  # killed mid-write
    with make(spec(audit=str(audit), policy={"window": 5})) as env:
        assert layer_of(env).curriculum.state() == state
        play(env, 3, random.Random(10))
    assert all(json.loads(line) for line in audit.read_text().splitlines())  # appended after a clean cut
    with make(spec(audit=str(audit), policy={"window": 5})) as env:
        assert layer_of(env).curriculum.episodes == 15
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(errors.StateError, match="Cannot open the curriculum audit log"):
        make(spec(audit=str(blocked / "audit.jsonl")))


def test_anchored_episodes_join_no_window_and_replay_skips_them(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    s = spec(anchor=0.5, audit=str(audit), policy={"window": 4, "early": False})
    with make(s) as env:
        anchored = 0
        for i in range(24):
            result = env.reset(seed=i)
            if result.info["curriculum"]["anchored"]:  # the base task: always failed here
                anchored += 1
                env.step(Action(tool="stop"))
            else:
                for action in env.unwrapped.solve():
                    env.step(action)
        layer = layer_of(env)
    state = layer.curriculum.state()  # after close: the last episode is counted too
    assert 6 <= anchored <= 18 and state["episodes"] == 24
    decisions = [json.loads(line) for line in audit.read_text().splitlines() if json.loads(line)["type"] == "decision"]
    assert decisions and all(d["window"] == {"episodes": 4, "successes": 4, "rate": 1.0} for d in decisions)
    with make(s) as env:
        assert layer_of(env).curriculum.state() == state
