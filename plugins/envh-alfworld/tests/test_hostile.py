"""Hostile and careless inputs: room files, task filters, task names, games ALFWorld's own
loader leaves out, interrupted builds; and the engine adapter's release of its library."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from envh import TaskRef, errors
from envh_alfworld.cli import alfworld
from envh_alfworld.examples import EXAMPLE_ROOMS
from envh_alfworld.rooms import RoomError, room_from_dict

SIMPLE = EXAMPLE_ROOMS["pick_and_place_simple"]
LIGHT = EXAMPLE_ROOMS["look_at_obj_in_light"]


@pytest.mark.parametrize("name", [
    "../escape", "a/../../escape", "/abs/path", "a//b", "./a", "a/.hidden", "..", "", "a/b/",
    "x" * 201, "name with space", "movable/x", "a\\b",
])
def test_room_names_cannot_leave_the_split_folder(name):
    with pytest.raises(RoomError, match="Room name"):
        room_from_dict({**SIMPLE, "name": name})


@pytest.mark.parametrize(("change", "message"), [
    ({"receptacles": ["Desk 1"]}, "field receptacles must be an object"),
    ({"objects": [["Mug 1", "Desk 1"]]}, "field objects must be an object"),
    ({"receptacles": {**SIMPLE["receptacles"], "Drawer 1": "closed"}}, r"receptacles\['Drawer 1'\] must be an object"),
    ({"receptacles": {**SIMPLE["receptacles"], "Drawer 1": {"closed": "yes"}}}, r"closed must be true or false"),
    ({"objects": {**SIMPLE["objects"], "Mug 1": 3}}, r"objects\['Mug 1'\] must be a string"),
    ({"object": ["Mug"]}, "field object must be a string"),
    ({"task_type": None}, "field task_type must be a string"),
    ({"name": 5}, "field name must be a string"),
    ({"task_type": "pick_and_place_simpel"}, "Unknown task_type 'pick_and_place_simpel'"),
])
def test_malformed_fields_are_named(change, message):
    with pytest.raises(RoomError, match=message):
        room_from_dict({**SIMPLE, **change})


def test_not_an_object_is_named():
    for value in ([SIMPLE], "room", 3, None):
        with pytest.raises(RoomError, match="must be a JSON object"):
            room_from_dict(value)


def test_lamp_in_a_closed_receptacle_is_refused():
    hidden = {**LIGHT, "objects": {**LIGHT["objects"], "DeskLamp 1": "Drawer 1"}}
    with pytest.raises(RoomError, match="Lamp 'DeskLamp 1' lies in closed receptacle 'Drawer 1'"):
        room_from_dict(hidden)
    room_from_dict({**hidden, "receptacles": {**LIGHT["receptacles"], "Drawer 1": {}}})  # open: fine


def test_make_games_names_the_file_and_room(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "escape"
    bad = tmp_path / "rooms.json"
    bad.write_text(json.dumps([SIMPLE, {**SIMPLE, "name": "../../escape"}]))
    result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--room", str(bad)])
    assert result.exit_code != 0 and f"{bad}: room 1: Room name '../../escape'" in result.output
    assert not outside.exists() and not out.exists(), "nothing is written before every room is valid"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--room", str(broken)])
    assert result.exit_code != 0 and str(broken) in result.output and "Traceback" not in result.output
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--room", str(deep)])
    assert result.exit_code == 1 and "nests too deeply" in result.output
    typo = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--task-type", "pick_and_plase_simple"])
    assert typo.exit_code == 2 and "pick_and_place_simple" in typo.output


def test_task_type_typos_say_which_types_exist(games_root):
    from envh_alfworld.bridge import AlfworldEnv

    with pytest.raises(errors.SpecError, match="Unknown ALFWorld task type.*'pick_and_plase_simple'.*Choose from"):
        AlfworldEnv(data_path=str(games_root), task_types=["pick_and_plase_simple"])


def test_task_refs_are_canonical(make_env, built):
    env = make_env()
    task = built["pick_and_place_simple"].task
    for spelling in (f"{task.instance_id}/game.tw-pddl", f"./{task.instance_id}/", task.instance_id.replace("/", "//")):
        result = env.reset(task=TaskRef(suite="alfworld", split="train", instance_id=spelling))
        assert result.info["task"] == str(task) and env.get_env_state()["task"]["instance_id"] == task.instance_id


@pytest.fixture(scope="module")
def odd_root(tmp_path_factory, games_root):
    """A data root whose games ALFWorld's loader would skip: movable, Sliced, unsolvable."""
    from envh_alfworld.data import discover

    source = discover(games_root, "train")[0]
    root = tmp_path_factory.mktemp("odd")
    base = root / "json_2.1.1" / "train"
    folder = shutil.copytree(source.game_file.rsplit("/", 1)[0], base / "ok" / "trial_1")
    for name in ("pick_and_place_simple-Mug-None-Desk-movable/trial_1", "pick_Sliced-Apple/trial_1", "unsolvable/trial_1"):
        shutil.copytree(folder, base / name)
    game = base / "unsolvable" / "trial_1" / "game.tw-pddl"
    game.write_text(json.dumps({**json.loads(game.read_text()), "solvable": False}))
    return root


@pytest.mark.parametrize(("instance", "message"), [
    ("pick_and_place_simple-Mug-None-Desk-movable/trial_1", "movable or sliced"),
    ("pick_Sliced-Apple/trial_1", "movable or sliced"),
    ("unsolvable/trial_1", "not marked solvable"),
])
def test_games_alfworld_filters_are_refused_when_named(odd_root, instance, message):
    from envh_alfworld.bridge import AlfworldEnv

    with AlfworldEnv(data_path=str(odd_root)) as env:
        assert [t.instance_id for t in env.list_tasks()] == ["ok/trial_1"]
        with pytest.raises(errors.EnvhError, match=message):
            env.reset(task=TaskRef(suite="alfworld", split="train", instance_id=instance))
        assert env.reset(task=TaskRef(suite="alfworld", split="train", instance_id="ok/trial_1")).observation.text


@pytest.mark.slow
def test_a_build_that_times_out_keeps_what_it_finished(tmp_path, monkeypatch):
    """alfworld-generate finishes the first room, then hangs: the timeout still keeps that
    game (on disk and in the cache) and says which rooms are missing."""
    from envh_alfworld import builder
    from envh_alfworld.data import discover

    real = builder._generator_script()
    hang = tmp_path / "generate_then_hang.py"
    hang.write_text(
        "import runpy, sys, time\n"
        "end = sys.argv.index('--end')\n"
        "sys.argv[end + 1] = '1'  # the real generator, first room only\n"
        f"runpy.run_path({real!r}, run_name='__main__')\n"
        "sys.stdout.flush()\n"
        "time.sleep(3600)\n")
    monkeypatch.setattr(builder, "_generator_script", lambda: str(hang))
    rooms = [room_from_dict(EXAMPLE_ROOMS[t]) for t in ("pick_and_place_simple", "look_at_obj_in_light")]
    with pytest.raises(builder.BuildError, match=r"did not finish within 20 s\. Kept the 1 game\(s\)") as caught:
        builder.build_games(rooms, tmp_path / "data", timeout=20)
    kept = discover(tmp_path / "data", "train")
    assert len(kept) == 1
    done = next(r for r in rooms if r.goal.task_type == kept[0].task_type)
    missing = next(r for r in rooms if r is not done)
    assert f"not built: {missing.name}" in str(caught.value)
    assert builder._cached(tmp_path / "data" / "json_2.1.1" / "train" / done.name,
                           builder.room_hash(done)) is not None


def test_adapter_refuses_untested_textworld():
    from envh_alfworld.engine import PddlAdapter

    PddlAdapter.check()  # the installed version is a tested one
    for version in ("1.6.2", "1.8.0", "2.0", "weird"):
        with pytest.raises(errors.EnvError, match=f"textworld {version} is installed"):
            PddlAdapter.check(version)


def test_a_room_cannot_replace_another_game(tmp_path):
    """Room names are folders: 'a' and 'a/b' would nest, and rebuilding 'a' would delete 'a/b'."""
    from envh_alfworld.builder import BuildError, build_games

    outer = room_from_dict({**SIMPLE, "name": "kitchen"})
    inner = room_from_dict({**SIMPLE, "name": "kitchen/inner"})
    with pytest.raises(BuildError, match="inside the game folder of room 'kitchen'"):
        build_games([outer, inner], tmp_path)
    base = tmp_path / "json_2.1.1" / "train"
    (base / "kitchen" / "inner").mkdir(parents=True)
    (base / "kitchen" / "inner" / "game.tw-pddl").write_text("{}")
    with pytest.raises(BuildError, match="holds other games"):
        build_games([outer], tmp_path)
    (base / "pantry").mkdir()
    (base / "pantry" / "game.tw-pddl").write_text("{}")
    with pytest.raises(BuildError, match="inside the existing game 'pantry'"):
        build_games([room_from_dict({**SIMPLE, "name": "pantry/shelf"})], tmp_path)
    assert (base / "kitchen" / "inner" / "game.tw-pddl").read_text() == "{}", "nothing was replaced"


def test_a_key_given_twice_in_a_room_file_is_refused(tmp_path):
    """Two "Mug 1" objects (or receptacles) in one room file: json kept the last and the
    room was built without the first, unseen; "appears twice" could never fire for them."""
    out = tmp_path / "out"
    text = json.dumps(SIMPLE)
    for dup, key in ((text.replace('"Mug 1": "CounterTop 1"', '"Mug 1": "CounterTop 1", "Mug 1": "Shelf 1"'), "Mug 1"),
                     (text.replace('"Desk 1": {}', '"Desk 1": {}, "Desk 1": {"closed": true}'), "Desk 1")):
        assert dup != text
        path = tmp_path / "dup.json"
        path.write_text(dup)
        result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--room", str(path)])
        assert result.exit_code == 1 and f"key '{key}' appears twice" in result.output, result.output
        assert not out.exists()
    bom = tmp_path / "bom.json"  # a byte-order mark is read, not a JSON error
    bom.write_text("\ufeff" + json.dumps({**SIMPLE, "name": "../x"}), encoding="utf-8")
    result = CliRunner().invoke(alfworld, ["make-games", "--out", str(out), "--room", str(bom)])
    assert result.exit_code == 1 and "Room name '../x'" in result.output, result.output


def test_game_files_of_the_wrong_shape_are_skipped_not_a_crash(tmp_path, games_root):
    """A traj_data.json that is a list (or whose task_type is not a string) raised
    TypeError out of list_tasks, so one bad folder broke every task of the split."""
    from envh_alfworld.bridge import AlfworldEnv
    from envh_alfworld.data import discover

    source = discover(games_root, "train")[0]
    base = tmp_path / "json_2.1.1" / "train"
    good = shutil.copytree(source.game_file.rsplit("/", 1)[0], base / "ok" / "trial_1")
    bad = {"traj_list/trial_1": ("traj_data.json", "[]"),
           "traj_type/trial_1": ("traj_data.json", '{"task_type": {"a": 1}}'),
           "game_list/trial_1": ("game.tw-pddl", "[1]"),
           "traj_bytes/trial_1": ("traj_data.json", b"\xff\xfe{")}
    for name, (file, content) in bad.items():
        folder = shutil.copytree(good, base / name)
        if isinstance(content, bytes):
            (folder / file).write_bytes(content)
        else:
            (folder / file).write_text(content)
    with AlfworldEnv(data_path=str(tmp_path)) as env:
        assert [t.instance_id for t in env.list_tasks()] == ["ok/trial_1"]
        for name in bad:
            with pytest.raises(errors.EnvhError):
                env.reset(task=TaskRef(suite="alfworld", split="train", instance_id=name))
