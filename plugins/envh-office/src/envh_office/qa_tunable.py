"""Tunable OfficeQA difficulty for the ``curriculum`` component kind.

One parameter, ``difficulty``: 0 draws an ``easy`` question, 1 a ``hard`` one, by the CSV's
own ``difficulty`` column (case-insensitive; questions with another or no label are never
drawn). Questions come from the ``train`` split of the manifest, or from ``all`` when there
is no manifest; a level with no question there falls back to the other one. The safe
default is easy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envh import TaskRef, errors

LEVELS = ("easy", "hard")
PARAMETERS: dict[str, dict[str, Any]] = {
    "difficulty": {"low": 0, "high": 1, "default": 0, "harder": 1,
                   "description": "0: an 'easy' question, 1: a 'hard' one (the CSV's difficulty column)"},
}


def task_for(bridge: Any, params: Mapping[str, Any], rng: Any) -> TaskRef:
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise errors.UnknownNameError("OfficeQA tunable parameter", unknown[0], list(PARAMETERS))
    level = params.get("difficulty", PARAMETERS["difficulty"]["default"])
    if type(level) is not int or level not in (0, 1):
        raise errors.SpecError(f"OfficeQA difficulty must be 0 (easy) or 1 (hard), got {level!r}")
    split = "train" if "train" in bridge.splits else "all" if set(bridge.splits) == {"all"} else None
    if split is None:
        raise errors.EnvError(f"OfficeQA: the split manifest has no 'train' split ({', '.join(bridge.splits)}); "
                              "a curriculum draws its questions from train, never from an evaluation split")
    by_level: dict[int, list[str]] = {0: [], 1: []}
    for uid in bridge.splits[split]:
        label = bridge.questions[uid].difficulty.lower()
        if label in LEVELS:
            by_level[LEVELS.index(label)].append(uid)
    chosen = by_level[level] or by_level[1 - level]
    if not chosen:
        raise errors.EnvError(f"OfficeQA: no question of split {split!r} is labelled easy or hard in the "
                              "difficulty column")
    return TaskRef(suite="officeqa", split=split, instance_id=rng.choice(sorted(chosen)))
