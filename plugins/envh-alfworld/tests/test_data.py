"""Task identity and data discovery, the ``envh alfworld`` commands, plugin registration,
the belief tracker's parsing, and engine release."""

from __future__ import annotations

import json
import subprocess
import sys

import envh
import pytest
from click.testing import CliRunner
from envh import Action, TaskRef, errors
from envh_alfworld.belief import BeliefTracker, parse_list
from envh_alfworld.catalogue import TASK_TYPES
from envh_alfworld.cli import alfworld


def do(command: str) -> Action:
    return Action(tool="do", args={"command": command})


def test_list_tasks_and_filters(make_env, built):
    env = make_env()
    tasks = env.list_tasks()
    assert len(tasks) == 12 and all(t.suite == "alfworld" and t.split == "train" for t in tasks)
    assert tasks == sorted(tasks, key=lambda t: t.instance_id)
    assert env.list_tasks("valid_seen") == []
    heat = make_env(task_types=["pick_heat_then_place_in_recep"]).list_games()
    assert {g.task_type for g in heat} == {"pick_heat_then_place_in_recep"} and len(heat) == 2
    # each task carries its type as its group, for filtering and stratifying
    assert {t.group for t in tasks} == set(TASK_TYPES)
    assert all(t.group == g.task_type for t, g in zip(tasks, env.list_games(), strict=True))
    assert [t for t in tasks if t.group == "pick_heat_then_place_in_recep"] == [g.task for g in heat]
    with pytest.raises(errors.EnvhError, match="Unknown ALFWorld split"):
        env.list_tasks("test")


def test_reset_picks_exactly_the_requested_game(make_env, built):
    env = make_env()
    for task_type in ("pick_two_obj_and_place", "look_at_obj_in_light"):
        result = env.reset(task=built[task_type].task, seed=123)
        assert result.info["task_type"] == task_type
        assert env.get_env_state()["task"]["instance_id"] == built[task_type].task.instance_id
    default = env.reset()
    assert default.info["task"] == str(env.list_tasks("train")[0])


def test_missing_and_foreign_tasks_are_clear_errors(make_env):
    env = make_env()
    with pytest.raises(errors.UnknownNameError, match="Unknown alfworld task in split 'train': 'nope/trial_0'"):
        env.reset(task=TaskRef(suite="alfworld", split="train", instance_id="nope/trial_0"))
    with pytest.raises(errors.EnvhError, match="escapes"):
        env.reset(task=TaskRef(suite="alfworld", split="train", instance_id="../../etc"))
    with pytest.raises(errors.EnvhError, match="not an ALFWorld task"):
        env.reset(task=TaskRef(suite="toy24", split="easy", instance_id="2,3,4"))


def test_empty_data_root_says_how_to_get_games(tmp_path):
    from envh_alfworld.bridge import AlfworldEnv

    with AlfworldEnv(data_path=str(tmp_path)) as env, pytest.raises(errors.EnvError, match="alfworld-download"):
        env.reset()
    result = CliRunner().invoke(alfworld, ["check", "--data-path", str(tmp_path)])
    assert result.exit_code == 0 and "No playable games" in result.output and "make-games" in result.output


def test_check_counts_per_split_and_type(games_root, built):
    result = CliRunner().invoke(alfworld, ["check", "--data-path", str(games_root), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["total"] == 12
    assert report["splits"]["train"] == {t: 2 for t in sorted(TASK_TYPES)}


def test_make_games_command(tmp_path):
    out = tmp_path / "data"
    result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--count", "2", "--seed", "5",
                                           "--split", "valid_unseen"])
    assert result.exit_code == 0, result.output
    assert "valid_unseen/pick_and_place_simple-" in result.output
    result = CliRunner().invoke(alfworld, ["check", "--data-path", str(out), "--json"])
    assert json.loads(result.output)["splits"]["valid_unseen"] == {
        "look_at_obj_in_light": 1, "pick_and_place_simple": 1}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "task_type": "nope", "object": "Mug", "receptacles": {}, "objects": {}}))
    result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--room", str(bad)])
    assert result.exit_code != 0 and "Unknown task_type 'nope'" in result.output


def test_plugin_registers_bridge_and_commands():
    """A fresh registry holding only this plugin: the bridge resolves, the group is added."""
    import click
    from envh_alfworld import hooks

    registry = envh.make_plugin_manager(entry_points=False, plugins=[hooks])
    assert registry.bridge("alfworld").load().__name__ == "AlfworldEnv"
    root = click.Group("envh")
    registry.register_commands(root)
    assert set(root.commands["alfworld"].commands) == {"check", "make-games"}
    # the plugin's own weakness predicate, for `envh rig alfworld --target weakness:...`
    assert registry.weakness_predicates()["alfworld.revisits"].bridge == "alfworld"


def test_importing_the_plugin_is_cheap():
    code = ("import sys, envh_alfworld.hooks, envh_alfworld.bridge, envh_alfworld.templates;"
            "heavy = [m for m in ('textworld', 'alfworld', 'fast_downward', 'spacy') if m in sys.modules];"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_belief_tracker_follows_the_game(make_env, built):
    env = make_env()
    game = built["pick_cool_then_place_in_recep"]
    env.reset(task=game.task)
    belief = env.get_env_state()["belief"]["receptacles"]
    assert set(belief) == {"countertop 1", "diningtable 1", "fridge 1"}
    assert all(not b["visited"] and b["contents"] is None for b in belief.values())
    env.step(do("go to fridge 1"))
    env.step(do("open fridge 1"))
    state = env.get_env_state()
    assert state["location"] == "fridge 1"
    assert state["belief"]["receptacles"]["fridge 1"] == {"visited": True, "open": True, "contents": ["egg 1"]}
    for command in game.walkthrough:
        env.step(do(command))
        if command.startswith("take"):
            assert env.get_env_state()["holding"] == "tomato 1"
    state = env.get_env_state()
    assert state["holding"] is None and state["won"] and state["done"]
    assert state["belief"]["object_states"] == {"tomato 1": ["cool"]}
    assert state["world"]["object_states"] == {"tomato 1": ["cool"]}
    assert "tomato 1" in state["belief"]["receptacles"]["countertop 1"]["contents"]


def test_belief_parsing_rules():
    assert parse_list("a mug 1, a pen 2, and a book 1") == ["mug 1", "pen 2", "book 1"]
    assert parse_list("nothing") == [] and parse_list("a drawer 1 (it is closed)") == ["drawer 1"]
    tracker = BeliefTracker()
    tracker.reset("You are in the middle of a room. Looking quickly around you, you see a drawer 1, "
                  "and a desk 1.\n\nYour task is to: put a pen in desk.")
    tracker.update("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.")
    tracker.update("open drawer 1", "You open the drawer 1. The drawer 1 is open. In it, you see a pen 1.")
    tracker.update("take pen 1 from drawer 1", "You pick up the pen 1 from the drawer 1.")
    tracker.update("close drawer 1", "You close the drawer 1.")
    snap = tracker.snapshot()
    assert snap["holding"] == "pen 1" and snap["receptacles"]["drawer 1"] == {
        "visited": True, "open": False, "contents": []}
    tracker.update("inventory", "You are not carrying anything.")
    assert tracker.snapshot()["holding"] is None


def test_close_releases_the_engine(make_env, built, monkeypatch):
    """Engines hand their fast-downward library copy back on close: making and closing many
    envs in one worker maps no more copies than were alive at once. With recycling off the
    same loop maps a new copy per engine, so the count does see the copies."""
    from envh_alfworld.engine import PddlAdapter, loaded_library_copies

    task = built["pick_and_place_simple"].task
    warm = make_env()
    warm.reset(task=task)
    warm.close()
    before = loaded_library_copies()
    for _ in range(5):
        env = make_env()
        env.reset(task=task)
        env.step(do("look"))
        env.close()
        assert env.get_env_state()["world"] == {}
    assert loaded_library_copies() == before >= 1
    from envh_alfworld import engine

    monkeypatch.setattr(PddlAdapter, "recycle", False)
    monkeypatch.setattr(engine, "_FREE_LIBS", [])
    for _ in range(2):
        env = make_env()
        env.reset(task=task)
        env.close()
    assert loaded_library_copies() == before + 2, "without recycling, every engine maps a new copy"
