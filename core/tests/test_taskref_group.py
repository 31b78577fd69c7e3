"""TaskRef.group: a label to filter and stratify tasks by, never part of a task's identity."""

from __future__ import annotations

import json

from envh import TaskRef
from envh.rollout.trajectory import EpisodeRequest, request_from_data, request_to_data


def _request(task: TaskRef) -> EpisodeRequest:
    return EpisodeRequest(key=f"{task}#0", spec={"bridge": "toy24"}, spec_id="x", task=task, seed=0, policy="p")


def test_group_is_description_not_identity():
    plain = TaskRef(suite="alfworld", split="train", instance_id="a/trial_1")
    grouped = TaskRef(suite="alfworld", split="train", instance_id="a/trial_1", group="pick_and_place_simple")
    assert plain == grouped and hash(plain) == hash(grouped) and str(plain) == str(grouped)
    assert {plain: 1}[grouped] == 1
    assert TaskRef(suite="alfworld", split="train", instance_id="b", group="pick_and_place_simple") != grouped


def test_recorded_json_is_unchanged_without_a_group_and_carries_one_that_is_set():
    plain = request_to_data(_request(TaskRef(suite="s", split="t", instance_id="i")))
    assert plain["task"] == {"suite": "s", "split": "t", "instance_id": "i"}
    grouped = request_to_data(_request(TaskRef(suite="s", split="t", instance_id="i", group="django/django")))
    assert grouped["task"] == {"suite": "s", "split": "t", "instance_id": "i", "group": "django/django"}
    back = request_from_data(json.loads(json.dumps(grouped)))
    assert back.task is not None and back.task.group == "django/django"
    assert request_from_data(json.loads(json.dumps(plain))).task.group is None  # type: ignore[union-attr]
