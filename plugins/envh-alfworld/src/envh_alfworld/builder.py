"""Build playable ALFWorld games from room descriptions with alfworld's own generator.

For each :class:`~envh_alfworld.rooms.Room` the builder writes ``traj_data.json`` and
``initial_state.pddl`` into a staging folder, runs the package's ``alfworld-generate``
once for the batch with the planner expert (fast-downward; the handcoded expert of 0.4.x
still looks for ``put`` and loops on pick_two_obj_and_place), and moves the results to
``<out>/json_2.1.1/<split>/<room name>/``. Output is cached by a content hash, so building
the same rooms again is free. Goal phrasing is seeded per game, so builds are reproducible.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import attrs
from envh import TaskRef, errors

from envh_alfworld import data
from envh_alfworld.problem import render_problem, render_traj_data
from envh_alfworld.rooms import Room, check_room_name, room_to_dict

BUILDER_VERSION = "1"

# Runs alfworld-generate as __main__ with the goal template choice seeded per game
# (alfworld draws it from the global `random` module, unseeded).
_RUNNER = """
import hashlib, random, runpy, sys
import alfworld.agents.utils.misc as misc
_orig = misc.add_task_to_grammar
def _seeded(grammar, traj_data, *a, **k):
    digest = hashlib.sha256(str(traj_data.get("task_id", "")).encode()).hexdigest()
    random.seed(int(digest[:16], 16))
    return _orig(grammar, traj_data, *a, **k)
misc.add_task_to_grammar = _seeded
script = sys.argv[1]
sys.argv = [script] + sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


class BuildError(errors.EnvhError):
    """alfworld-generate failed or judged a room unsolvable."""


@attrs.frozen(kw_only=True)
class BuiltGame:
    """A game on disk: its task identity, task type, file and the planner's walkthrough."""

    task: TaskRef
    task_type: str
    game_file: str
    walkthrough: tuple[str, ...]


def room_hash(room: Room) -> str:
    """Content hash of a room plus the builder and alfworld versions (the cache key)."""
    import alfworld.info

    blob = json.dumps({"room": room_to_dict(room), "builder": BUILDER_VERSION,
                       "alfworld": alfworld.info.__version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _generator_script() -> str:
    here = Path(sys.executable).parent / "alfworld-generate"
    found = str(here) if here.is_file() else shutil.which("alfworld-generate")
    if not found:
        raise BuildError("alfworld-generate was not found next to this Python or on PATH; "
                         "install it with: pip install alfworld")
    return found


def _cached(folder: Path, digest: str) -> BuiltGame | None:
    try:
        traj = json.loads((folder / "traj_data.json").read_text())
        game = json.loads((folder / data.GAME_FILE).read_text())
    except (OSError, ValueError):
        return None
    if traj.get("envh_hash") != digest or not game.get("solvable"):
        return None
    return None if not game.get("walkthrough") else _built(folder, traj, game)


def _built(folder: Path, traj: dict, game: dict) -> BuiltGame:
    split_dir = folder
    while split_dir.name not in data.SPLITS:
        split_dir = split_dir.parent
    task = TaskRef(suite=data.SUITE, split=split_dir.name,
                   instance_id=folder.relative_to(split_dir).as_posix(), group=traj["task_type"])
    return BuiltGame(task=task, task_type=traj["task_type"], game_file=str(folder / data.GAME_FILE),
                     walkthrough=tuple(game["walkthrough"]))


def build_games(rooms: Iterable[Room], out: str | Path, *, split: str = "train",
                timeout: float = 600.0) -> list[BuiltGame]:
    """Build (or reuse from cache) one game per room under ``out``; returns them in order.

    ``out`` is an ALFWorld data root: point ``ALFWORLD_DATA`` (or the bridge's
    ``data_path``) at it to play the games.
    """
    rooms = list(rooms)
    for room in rooms:  # names become folders: never write outside the split root
        check_room_name(room.name)
    names = [r.name for r in rooms]
    if len(set(names)) != len(names):
        raise BuildError(f"Room names must be unique within a build, got {names}")
    base = data.split_root(Path(out), split)
    _check_nesting(names, base)
    digests = {r.name: room_hash(r) for r in rooms}
    todo = [r for r in rooms if _cached(base / r.name, digests[r.name]) is None]
    if todo:
        _generate(todo, base, digests, timeout)
    built = []
    for room in rooms:
        game = _cached(base / room.name, digests[room.name])
        if game is None:
            raise BuildError(f"alfworld-generate found no plan for room {room.name!r}: check that "
                             "its task can be solved (targets present, receptacles reachable)")
        built.append(game)
    return built


def _check_nesting(names: list[str], base: Path) -> None:
    """A game folder may not hold another game, nor lie inside one: rebuilding the outer
    one would replace the inner one with it."""
    for name in names:
        for other in names:
            if other != name and other.startswith(name + "/"):
                raise BuildError(f"Room {other!r} would lie inside the game folder of room {name!r}; "
                                 "give them sibling names")
        parts = name.split("/")
        for i in range(1, len(parts)):
            if (base / "/".join(parts[:i]) / data.GAME_FILE).exists():
                raise BuildError(f"Room {name!r} would lie inside the existing game {'/'.join(parts[:i])!r} "
                                 f"under {base}")
        folder = base / name
        if folder.is_dir() and any(p != folder / data.GAME_FILE for p in folder.rglob(data.GAME_FILE)):
            raise BuildError(f"Room {name!r} would replace the folder {folder}, which holds other games")


def _generate(rooms: list[Room], base: Path, digests: dict[str, str], timeout: float) -> None:
    import alfworld.info

    base.mkdir(parents=True, exist_ok=True)
    # Stage outside the split folder so discovery never sees half-built games.
    with tempfile.TemporaryDirectory(prefix=".envh-stage-", dir=base.parents[1]) as stage_dir:
        src, dst = Path(stage_dir) / "src", Path(stage_dir) / "out"
        for room in rooms:
            folder = src / room.name
            folder.mkdir(parents=True)
            traj = render_traj_data(room)
            traj["envh_hash"] = digests[room.name]
            (folder / "traj_data.json").write_text(json.dumps(traj, indent=1, sort_keys=True))
            (folder / "initial_state.pddl").write_text(render_problem(room))
        cmd = [sys.executable, "-c", _RUNNER, _generator_script(),
               "--data_path", str(src), "--save_path", str(dst), "--expert_type", "planner",
               "--domain", alfworld.info.ALFRED_PDDL_PATH, "--grammar", alfworld.info.ALFRED_TWL2_PATH,
               "--start", "0", "--end", str(len(rooms) + 1)]
        failure = None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, check=False)
            if proc.returncode != 0:
                failure = f"alfworld-generate failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
        except subprocess.TimeoutExpired:
            failure = f"alfworld-generate did not finish within {timeout:g} s"
        # Whatever finished is kept (and cached), even when the batch failed or timed out.
        kept = []
        for room in rooms:
            made, final = dst / room.name, base / room.name
            try:
                json.loads((made / data.GAME_FILE).read_text())
            except (OSError, ValueError):
                continue  # not made, or cut off mid-write
            shutil.copy(src / room.name / "initial_state.pddl", made / "initial_state.pddl")
            if final.exists():
                shutil.rmtree(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(made), str(final))
            kept.append(room.name)
        if failure:
            missing = [r.name for r in rooms if r.name not in kept]
            raise BuildError(f"{failure}. Kept the {len(kept)} game(s) it finished ({', '.join(kept) or 'none'}); "
                             f"not built: {', '.join(missing)}. Run the same command again to build the "
                             "rest (finished games are cached).")
