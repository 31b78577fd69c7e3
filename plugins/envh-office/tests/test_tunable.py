"""Tunable OfficeQA difficulty: easy and hard questions by the CSV's difficulty column, from
the train split only, answered and graded by the bridge's own matcher, and a curriculum
moving from easy to hard."""

from __future__ import annotations

import json
import random
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from office_fixtures import GOLD, QUESTIONS

LEVEL = {q["uid"]: q["difficulty"] for q in QUESTIONS}


def env_with(officeqa_dirs, tmp_path: Path, manifest: dict | None):
    from envh_office.qa_bridge import OfficeQAEnv

    path = None
    if manifest is not None:
        path = tmp_path / "splits.json"
        path.write_text(json.dumps(manifest))
    return OfficeQAEnv(officeqa_dirs["csv"], officeqa_dirs["corpus"], None if path is None else str(path))


def answer(env, uid: str, text: str | None = None) -> bool:
    env.step(Action(tool="answer", args={"text": f"<FINAL_ANSWER>{text or GOLD[uid]}</FINAL_ANSWER>"}))
    return env.evaluate().success


def test_each_level_draws_its_questions_from_train_and_they_are_graded(officeqa_dirs, tmp_path: Path) -> None:
    env = env_with(officeqa_dirs, tmp_path, {"train": ["UID0001", "UID0002", "UID0003"], "test": []})
    try:
        assert set(env.tunable_parameters()) == {"difficulty"}
        for level, label in ((0, "easy"), (1, "hard")):
            tasks = {env.task_for({"difficulty": level}, random.Random(s)) for s in range(12)}
            assert {LEVEL[t.instance_id] for t in tasks} == {label} and {t.split for t in tasks} == {"train"}
            for task in sorted(tasks, key=str):
                env.reset(task=task)
                assert env.get_env_state()["difficulty"] == label
                assert answer(env, task.instance_id)
                env.reset(task=task)
                assert not answer(env, task.instance_id, "42")
        assert len({t.instance_id for s in range(12)
                    for t in [env.task_for({"difficulty": 1}, random.Random(s))]}) == 2
    finally:
        env.close()


def test_evaluation_splits_are_never_drawn(officeqa_dirs, tmp_path: Path) -> None:
    # the fixture's manifest: train holds the one easy question, test the two hard ones
    env = env_with(officeqa_dirs, tmp_path, {"train": ["UID0001"], "test": ["UID0002", "UID0003"]})
    try:
        assert {env.task_for({"difficulty": 1}, random.Random(s)).instance_id for s in range(8)} == {"UID0001"}
    finally:
        env.close()
    env = env_with(officeqa_dirs, tmp_path, {"val": ["UID0001"], "test": ["UID0002"]})
    try:
        with pytest.raises(errors.EnvError, match="no 'train' split"):
            env.task_for({"difficulty": 0}, random.Random(0))
    finally:
        env.close()
    env = env_with(officeqa_dirs, tmp_path, None)  # no manifest: the one split 'all'
    try:
        assert LEVEL[env.task_for({"difficulty": 1}, random.Random(0)).instance_id] == "hard"
        for bad in ({"difficulty": 2}, {"difficulty": True}, {"difficulty": "hard"}, {"level": 1}):
            with pytest.raises(errors.EnvhError):
                env.task_for(bad, random.Random(0))
    finally:
        env.close()


def test_the_curriculum_layer_moves_from_easy_to_hard(officeqa_dirs, tmp_path: Path) -> None:
    manifest = tmp_path / "splits.json"
    manifest.write_text(json.dumps({"train": ["UID0001", "UID0002", "UID0003"]}))
    spec = {"bridge": "officeqa", "config": {"data": officeqa_dirs["csv"], "corpus": officeqa_dirs["corpus"],
                                             "split_manifest": str(manifest)},
            "layers": [{"kind": "curriculum", "training": True, "anchor": 0.0,
                        "params": {"difficulty": {"range": [0, 1], "init": 0}},
                        "policy": {"window": 1, "floor": 0.0, "ceiling": 0.5, "early": False}}]}
    seen = []
    with envh.make(spec, data=[manifest]) as env:
        for _ in range(2):
            result = env.reset(seed=0)
            uid = env.unwrapped.question.uid
            seen.append((result.info["curriculum"]["params"]["difficulty"], LEVEL[uid]))
            assert answer(env, uid)
    assert seen == [(0, "easy"), (1, "hard")]
