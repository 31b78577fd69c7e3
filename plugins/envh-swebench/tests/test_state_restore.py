"""save_state / from_state: replay by default, a docker-commit snapshot when asked."""

from __future__ import annotations

import json

import docker.errors
from envh import Action, TaskRef

TASK = TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")
ACTIONS = [Action(tool="bash", args={"command": "echo one > a.txt"}),
           Action(tool="str_replace_editor", args={"command": "create", "path": "b.txt", "file_text": "two\n"}),
           Action(tool="bash", args={"command": "python3 -m pytest -q tests > /dev/null; echo $?"})]


def _play(env):
    env.reset(task=TASK, seed=0)
    for action in ACTIONS:
        env.step(action)


def test_replay_restore(make_env):
    env, other = make_env(), make_env()
    _play(env)
    saved = json.loads(json.dumps(env.save_state()))
    assert saved["format"] == "replay" and "snapshot" not in saved
    assert other.from_state(saved) == env.observe()
    assert other.get_env_state() == env.get_env_state()
    cat = other.step(Action(tool="bash", args={"command": "cat a.txt b.txt"}))
    assert cat.observation.text == "one\ntwo\n"


def test_snapshot_restore_skips_the_replay(make_env, docker_client):
    env, other = make_env(snapshot=True), make_env(snapshot=True)
    _play(env)
    saved = json.loads(json.dumps(env.save_state()))
    images = [saved["snapshot"]["image"]]
    try:
        # Poison the replay: were it used, the restored tree would hold 'changed'.
        saved["actions"][0]["args"]["command"] = "echo changed > a.txt"
        assert other.from_state(saved) == env.observe()
        assert other.get_env_state() == env.get_env_state()
        assert other.box.container.image.id == images[0]
        cat = other.step(Action(tool="bash", args={"command": "cat a.txt b.txt"}))
        assert cat.observation.text == "one\ntwo\n"
        undo = other.step(Action(tool="str_replace_editor", args={"command": "undo_edit", "path": "b.txt"}))
        assert "removed" in undo.observation.text  # editor history came along
        again = other.save_state()
        images.append(again["snapshot"]["image"])
        assert len(again["actions"]) == len(ACTIONS) + 2
    finally:
        other.close()
        for image in reversed(images):  # the second snapshot is a child of the first
            try:
                docker_client.images.remove(image, force=True)
            except docker.errors.NotFound:
                pass


def test_missing_snapshot_image_falls_back_to_replay(make_env, docker_client):
    env, other = make_env(snapshot=True), make_env()
    _play(env)
    saved = json.loads(json.dumps(env.save_state()))
    docker_client.images.remove(saved["snapshot"]["image"], force=True)
    assert other.from_state(saved) == env.observe()
    assert other.get_env_state() == env.get_env_state()
    assert other.box.container.image.id != saved["snapshot"]["image"]  # the instance image


def test_a_state_naming_a_foreign_image_replays(make_env, docker_client):
    """A saved state is data: its snapshot image must be one this package committed,
    or restoring replays instead of starting whatever image the state names."""
    env, other = make_env(snapshot=True), make_env()
    _play(env)
    saved = json.loads(json.dumps(env.save_state()))
    saved["snapshot"]["image"] = "envh-swebench/mathx-nopython:latest"  # present, but not a snapshot
    assert other.from_state(saved) == env.observe()
    assert other.box.container.image.tags != ["envh-swebench/mathx-nopython:latest"]
    assert not other.box.no_runner
    for bogus in (None, 42, {"x": 1}):  # one env, replayed into again and again
        other.from_state({**saved, "snapshot": bogus})
        assert other.get_env_state() == env.get_env_state()
