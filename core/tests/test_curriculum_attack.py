"""Attacks on the curriculum kind's discipline: the kill switch flipped in the middle of
a window, and a crafted saved state that would disarm the circuit breaker."""

from __future__ import annotations

import json
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh.components.curriculum import CurriculumLayer
from envh.curriculum import FREEZE_VAR


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
    with envh.make(spec(audit=str(audit))) as env:
        for i in range(3):  # mid-window, at the init size 5 (the safe default is 4)
            assert env.reset(seed=i).info["curriculum"]["params"] == {"size": 5}
            env.step(Action(tool="stop"))
        monkeypatch.setenv(FREEZE_VAR, "1")
        for i in range(3, 6):  # the switch is on: every episode from now on runs at the safe default
            assert env.reset(seed=i).info["curriculum"]["params"] == {"size": 4}, i
            env.step(Action(tool="stop"))
    # the log written under the switch still replays and resumes
    with envh.make(spec(audit=str(audit))) as env:
        assert env.reset(seed=9).info["curriculum"]["params"] == {"size": 4}
    monkeypatch.delenv(FREEZE_VAR)
    with envh.make(spec(audit=str(audit))) as env:  # switched off again: the run goes on
        assert env.reset(seed=10).info["curriculum"]["params"] in ({"size": 4}, {"size": 5})
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["params"]["size"] for r in lines if r["type"] == "episode"][:6] == [5, 5, 5, 4, 4, 4]


@pytest.mark.parametrize("field,value", [("below", -1000), ("below", 2), ("outcomes", [False] * 50),
                                         ("episodes", -5), ("below", "1")])
def test_a_crafted_saved_state_cannot_disarm_the_breaker(field: str, value: object) -> None:
    with envh.make(spec()) as env:
        env.reset(seed=0)
        env.step(Action(tool="stop"))
        saved = json.loads(json.dumps(env.save_state()))
        saved["data"]["curriculum"][field] = value
        with envh.make(spec()) as other, pytest.raises(errors.StateError, match="curriculum"):
            other.from_state(saved)
