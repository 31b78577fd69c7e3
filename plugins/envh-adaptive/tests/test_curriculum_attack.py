"""Attacks on the curriculum kind's discipline: the kill switch flipped in the middle of
a window, and a crafted saved state that would disarm the circuit breaker."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh_adaptive.components.curriculum import CurriculumLayer
from envh_adaptive.curriculum import FREEZE_VAR

#: These tests choose the audit logs and libraries themselves: a spec that names a host path
#: needs the caller's trust (the default refuses it), so they build trusted, and say
#: ``trust="untrusted"`` where the refusal is what they test.
make = functools.partial(envh.make, trust="trusted")


def spec(**layer):
    base = {"kind": "curriculum", "training": True, "params": {"size": {"range": [3, 5], "init": 5}},
            "policy": {"window": 10, "floor": 0.6, "ceiling": 0.85, "breaker": 2, "early": False},
            "anchor": 0.0}
    return {"bridge": "toy24", "layers": [{**base, **layer}]}


def layer_of(env) -> CurriculumLayer:
    return next(e for e in envh.iter_layers(env) if isinstance(e, CurriculumLayer))


def test_the_env_var_kill_switch_takes_effect_at_the_next_episode_not_the_next_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    audit = tmp_path / "audit.jsonl"
    monkeypatch.delenv(FREEZE_VAR, raising=False)
    with make(spec(audit=str(audit))) as env:
        for i in range(3):  # mid-window, at the init size 5 (the safe default is 4)
            assert env.reset(seed=i).info["curriculum"]["params"] == {"size": 5}
            env.step(Action(tool="stop"))
        monkeypatch.setenv(FREEZE_VAR, "1")
        for i in range(3, 6):  # the switch is on: every episode from now on runs at the safe default
            assert env.reset(seed=i).info["curriculum"]["params"] == {"size": 4}, i
            env.step(Action(tool="stop"))
    # the log written under the switch still replays and resumes
    with make(spec(audit=str(audit))) as env:
        assert env.reset(seed=9).info["curriculum"]["params"] == {"size": 4}
    monkeypatch.delenv(FREEZE_VAR)
    with make(spec(audit=str(audit))) as env:  # switched off again: the run goes on
        assert env.reset(seed=10).info["curriculum"]["params"] in ({"size": 4}, {"size": 5})
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["params"]["size"] for r in lines if r["type"] == "episode"][:6] == [5, 5, 5, 4, 4, 4]


@pytest.mark.parametrize("field,value", [("below", -1000), ("below", 2), ("outcomes", [False] * 50),
                                         ("episodes", -5), ("below", "1")])
def test_a_crafted_saved_state_cannot_disarm_the_breaker(field: str, value: object) -> None:
    with make(spec()) as env:
        env.reset(seed=0)
        env.step(Action(tool="stop"))
        saved = json.loads(json.dumps(env.save_state()))
        saved["data"]["curriculum"][field] = value
        with make(spec()) as other, pytest.raises(errors.StateError, match="curriculum"):
            other.from_state(saved)


def solve(env) -> None:
    for action in env.unwrapped.solve():
        env.step(action)


def test_restoring_an_older_state_cannot_rewind_the_append_only_audit_log(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    s = spec(audit=str(audit), params={"size": {"range": [3, 5], "init": 3}},
             policy={"window": 2, "floor": 0.4, "ceiling": 0.6, "early": False})
    with make(s) as env:
        for i in range(3):
            env.reset(seed=i)
            solve(env)
        env.reset(seed=3)
        env.step(Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}))
        within = json.loads(json.dumps(env.save_state()))
        env.from_state(within)  # a branch within the episode it was saved in is fine
        for i in range(4, 6):
            env.reset(seed=i)
            solve(env)
        with pytest.raises(errors.StateError, match="rewind or skip the append-only audit log"):
            env.from_state(within)
        assert env.evaluate().success  # refused before anything moved: episode 6 is still the solved one
        env.reset(seed=6)
    with make(s) as env:  # the log is still one stream: the run resumes
        assert env.reset(seed=7).info["curriculum"]["episode"] == 8
    episodes = [json.loads(line)["episode"] for line in audit.read_text().splitlines()
                if json.loads(line)["type"] == "episode"]
    assert episodes == list(range(1, 9))  # the resumed episode 8 is logged at close


def test_a_restored_episode_keeps_its_values_and_crafted_ones_are_refused() -> None:
    with make(spec()) as env, make(spec(params={"size": {"range": [3, 5], "init": 3}})) as other:
        env.reset(seed=0)
        saved = json.loads(json.dumps(env.save_state()))
        other.from_state(saved)
        assert layer_of(other).current == layer_of(env).current and layer_of(other).current["params"] == {"size": 5}
        assert layer_of(other).curriculum.values == {"size": 5}
        for bad in ({"params": {"size": 99}}, {"params": {"size": 5, "extra": 1}}, {"params": "x"}, 7):
            saved["data"]["current"] = bad
            with pytest.raises(errors.StateError, match="curriculum"):
                other.from_state(saved)


@pytest.mark.parametrize("params", [{"size": 2}, {"size": 12}, {"max_number": 10**9}, {"size": True},
                                    {"size": "4"}, {"size": 4.0}, {"colour": 1}])
def test_toy24_refuses_values_outside_its_declared_bounds(params: dict) -> None:
    import random

    with make("toy24") as env, pytest.raises(errors.SpecError, match="Toy24 parameter"):
        env.unwrapped.task_for(params, random.Random(0))


def test_a_coach_memo_with_infinity_cannot_put_non_json_into_the_audit_log(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    code = "def coach(stats, memo):\n    memo['x'] = 1e308 * 10\n    return None\n"
    s = spec(audit=str(audit), params={"size": {"range": [3, 5], "init": 3}},
             policy={"type": "coach", "code": code, "window": 1})
    with make(s) as env:
        for i in range(2):
            env.reset(seed=i)
            env.step(Action(tool="stop"))

    def strict(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    records = [json.loads(line, parse_constant=strict) for line in audit.read_text().splitlines()]
    decisions = [r for r in records if r["type"] == "decision"]
    assert decisions and all(d["decision"] == "coach-failed" for d in decisions)
    assert "NaN or Infinity" in decisions[0]["reason"]


@pytest.mark.parametrize("how", ["spec", "make"])
def test_an_untrusted_spec_cannot_make_the_audit_log_write_a_host_file(tmp_path: Path, how: str) -> None:
    victim = tmp_path / "victim" / "file.txt"
    s = spec(audit=str(victim))
    with pytest.raises(errors.SpecError, match="untrusted spec may not name a host path"):
        make({**s, "trust": "untrusted"}) if how == "spec" else make(s, trust="untrusted")
    assert not victim.parent.exists()
    leg = {"bridge": "toy24", "layers": spec(audit=str(victim))["layers"]}  # chain legs inherit the trust
    with pytest.raises(errors.SpecError, match="untrusted spec may not name a host path"):
        make({"bridge": "toy24", "layers": [{"kind": "chain", "legs": [leg]}]}, trust="untrusted")
    with make(spec(), trust="untrusted"):  # without a path it builds
        pass


def test_the_anchor_fraction_holds_over_many_episodes_and_anchored_ones_play_the_requested_task() -> None:
    task = envh.TaskRef(suite="toy24", split="hard", instance_id="1,5,5,5")
    with make(spec(anchor=0.3, policy={"window": 1000})) as env:
        infos = [env.reset(task=task, seed=i).info for i in range(200)]
    anchored = [i["curriculum"]["anchored"] for i in infos]
    assert 0.2 <= sum(anchored) / len(anchored) <= 0.4  # 0.3 ± 3 sd of a binomial(200, 0.3)
    tasks = [i["envh"][-1]["task"] for i in infos]
    assert all((t == str(task)) == a for t, a in zip(tasks, anchored))
    assert max(len(run) for run in "".join("a" if a else "." for a in anchored).split(".")) < 8  # no long streaks
