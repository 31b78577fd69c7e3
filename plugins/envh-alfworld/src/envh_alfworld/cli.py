"""``envh alfworld``: check which games are installed, and build new ones."""

from __future__ import annotations

import json
from pathlib import Path

import click

from envh_alfworld.catalogue import TASK_TYPES


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json keeps the last of two equal keys: a second "Mug 1" or "Drawer 1" in a room
    file would silently replace the first. Refuse it instead."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


@click.group(name="alfworld")
def alfworld() -> None:
    """ALFWorld games: find them (check) and make new ones (make-games)."""


@alfworld.command()
@click.option("--data-path", default=None, help="ALFWorld data root (default: $ALFWORLD_DATA or ~/.cache/alfworld).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check(data_path: str | None, as_json: bool) -> None:
    """Report the playable games per split and task type, and how to get more."""
    from envh_alfworld import data

    root = data.data_root(data_path)
    counts = data.summary(root)
    total = sum(sum(c.values()) for c in counts.values())
    if as_json:
        click.echo(json.dumps({"data_path": str(root), "total": total, "splits": counts}))
        return
    click.echo(f"ALFWorld data root: {root}")
    for split, per_type in counts.items():
        click.echo(f"  {split}: {sum(per_type.values())} games")
        for task_type, n in per_type.items():
            click.echo(f"    {task_type}: {n}")
    if total == 0:
        click.echo(f"No playable games found. {data.FETCH_HINT}")


@alfworld.command("make-games")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Data root to write (json_2.1.1/<split>/...).")
@click.option("--split", default="train", show_default=True, help="train, valid_seen or valid_unseen.")
@click.option("--seed", default=0, show_default=True, help="First seed for random rooms.")
@click.option("--count", default=6, show_default=True, help="How many random rooms (cycling task types).")
@click.option("--task-type", "task_types", multiple=True, type=click.Choice(TASK_TYPES),
              help="Restrict random rooms to these task types.")
@click.option("--examples", is_flag=True, help="Build the example room of each task type instead.")
@click.option("--room", "room_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A room description JSON file (an object, or a list of them); replaces random rooms.")
@click.option("--timeout", default=600.0, show_default=True,
              help="Seconds for alfworld-generate; games it finished by then are kept.")
def make_games(out: str, split: str, seed: int, count: int, task_types: tuple[str, ...],
               examples: bool, room_files: tuple[str, ...], timeout: float) -> None:
    """Build ALFWorld games (traj_data.json, initial_state.pddl, game.tw-pddl) with alfworld-generate."""
    from envh_alfworld.builder import build_games
    from envh_alfworld.rooms import RoomError, room_from_dict
    from envh_alfworld.sampling import sample_rooms

    try:
        if examples:
            from envh_alfworld.examples import EXAMPLE_ROOMS

            rooms = [room_from_dict(r) for r in EXAMPLE_ROOMS.values()]
        elif room_files:
            rooms = []
            for path in room_files:
                try:
                    loaded = json.loads(Path(path).read_text(encoding="utf-8-sig"),
                                        object_pairs_hook=_unique_keys)
                    entries = loaded if isinstance(loaded, list) else [loaded]
                    for i, entry in enumerate(entries):
                        try:
                            rooms.append(room_from_dict(entry))
                        except RoomError as exc:
                            raise RoomError(f"room {i}: {exc}" if isinstance(loaded, list) else str(exc)) from exc
                except RecursionError:
                    raise click.ClickException(f"{path}: the JSON nests too deeply to be a room") from None
                except (RoomError, ValueError, OSError) as exc:
                    raise click.ClickException(f"{path}: {exc}") from exc
        else:
            rooms = sample_rooms(seed, count, task_types or None)
    except (RoomError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    from envh_alfworld.builder import BuildError

    try:
        games = build_games(rooms, out, split=split, timeout=timeout)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    for game in games:
        click.echo(f"{game.task.split}/{game.task.instance_id}\t{game.task_type}\t{len(game.walkthrough)} steps")
    click.echo(f"Play them with ALFWORLD_DATA={Path(out).resolve()} (or bridge config data_path).")
