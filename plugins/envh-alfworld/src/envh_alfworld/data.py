"""Where ALFWorld games live and which ones exist: task identity for the bridge.

Layout (alfworld's own): ``$ALFWORLD_DATA/json_2.1.1/<split>/<task folder>/<trial>/``
holding ``traj_data.json`` and ``game.tw-pddl``. A task is
``TaskRef(suite="alfworld", split=<split>, instance_id=<game folder relative to the split
root>)``; like alfworld, movable/sliced trajectories and games not marked solvable are left
out. Games built by :mod:`envh_alfworld.builder` use the same layout.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import attrs
from envh import TaskRef, errors

SUITE = "alfworld"
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")
JSON_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"


@attrs.frozen(kw_only=True)
class GameInfo:
    """One playable game: its task identity, task type and file."""

    task: TaskRef
    task_type: str
    game_file: str


def data_root(path: str | os.PathLike[str] | None = None) -> Path:
    """The ALFWorld data root: ``path``, else ``$ALFWORLD_DATA``, else ``~/.cache/alfworld``."""
    if path:
        return Path(os.path.expandvars(os.fspath(path))).expanduser()
    env = os.environ.get("ALFWORLD_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "alfworld"


def split_root(root: Path, split: str) -> Path:
    """The folder holding one split's games."""
    check_split(split)
    return root / JSON_DIR / split


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise errors.UnknownNameError("ALFWorld split", split, list(SPLITS))


def discover(root: Path, split: str) -> list[GameInfo]:
    """Every solvable game of ``split`` under ``root``, sorted by instance id."""
    base = split_root(root, split)
    games: list[GameInfo] = []
    if not base.is_dir():
        return games
    for dirpath, _dirs, files in os.walk(base):
        if "traj_data.json" not in files or GAME_FILE not in files:
            continue
        if "movable" in dirpath or "Sliced" in dirpath:
            continue
        folder = Path(dirpath)
        try:
            traj = json.loads((folder / "traj_data.json").read_text())
            game = json.loads((folder / GAME_FILE).read_text())
        except (OSError, ValueError, RecursionError):
            continue
        # A game whose files are not the objects ALFWorld writes is skipped like an unreadable one.
        if not isinstance(traj, dict) or not isinstance(game, dict) or not isinstance(traj.get("task_type"), str):
            continue
        task_type, solvable = traj["task_type"], game.get("solvable")
        if not solvable:
            continue
        instance = folder.relative_to(base).as_posix()
        games.append(GameInfo(task=TaskRef(suite=SUITE, split=split, instance_id=instance, group=task_type),
                              task_type=task_type, game_file=str(folder / GAME_FILE)))
    games.sort(key=lambda g: g.task.instance_id)
    return games


def canonical_task(task: TaskRef) -> TaskRef:
    """The one spelling of a task: the game folder relative to the split root, without a
    ``/game.tw-pddl`` suffix, ``./`` parts, doubled or trailing slashes."""
    if task.suite != SUITE:
        raise errors.EnvhError(f"Task {task} is not an ALFWorld task (suite must be {SUITE!r})")
    check_split(task.split)
    parts = [p for p in task.instance_id.replace("\\", "/").split("/") if p not in ("", ".")]
    if parts and parts[-1] == GAME_FILE:
        parts = parts[:-1]
    if not parts or ".." in parts:
        raise errors.EnvhError(f"Task instance {task.instance_id!r} escapes the split folder "
                               "(or names none): give the game folder relative to the split root")
    return TaskRef(suite=SUITE, split=task.split, instance_id="/".join(parts))


def game_file_for(root: Path, task: TaskRef) -> str:
    """The ``game.tw-pddl`` of ``task``; a clear error when the task is not there, or is
    one ALFWorld's own loader leaves out (movable or sliced trajectories, unsolvable games)."""
    task = canonical_task(task)
    base = split_root(root, task.split)
    path = (base / task.instance_id).resolve()
    if base.resolve() not in path.parents:
        raise errors.EnvhError(f"Task instance {task.instance_id!r} escapes the split folder {base}")
    game = path / GAME_FILE
    if not game.is_file():
        raise errors.EnvhError(
            f"No ALFWorld game for task {task} (looked for {game}). "
            f"Run `envh alfworld check` to see which games exist.")
    if "movable" in task.instance_id or "Sliced" in task.instance_id:
        raise errors.EnvhError(f"Task {task} is a movable or sliced trajectory, which ALFWorld's own "
                               "loader leaves out; `envh alfworld check` lists the playable games.")
    try:
        solvable = json.loads(game.read_text()).get("solvable")
    except (OSError, ValueError, AttributeError) as exc:
        raise errors.EnvhError(f"The game file of task {task} cannot be read ({game}): {exc}") from exc
    if not solvable:
        raise errors.EnvhError(f"Task {task} is not marked solvable in {game}; ALFWorld's own loader "
                               "leaves such games out.")
    return str(game)


def summary(root: Path) -> dict[str, dict[str, int]]:
    """Counts of playable games per split and task type (what ``envh alfworld check`` shows)."""
    return {split: dict(sorted(Counter(g.task_type for g in discover(root, split)).items()))
            for split in SPLITS}


FETCH_HINT = (
    "To fetch the official ALFWorld games: `pip install alfworld` then `alfworld-download` "
    "(writes to $ALFWORLD_DATA, default ~/.cache/alfworld). To build your own rooms instead: "
    "`envh alfworld make-games --out DIR` and set ALFWORLD_DATA=DIR (or the bridge's "
    "data_path config).")
