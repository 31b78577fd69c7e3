"""Tunable ALFWorld difficulty for the ``curriculum`` component kind.

Four integer parameters shape a room that the procedural builder turns into a real game
(alfworld's own ``alfworld-generate`` with the planner expert, offline):

- ``task_tier`` (1–6): the episode's task type is drawn from the first ``task_tier`` types
  of the ladder pick → look → clean → heat → cool → pick two (6: all of them, ALFWorld's mix);
- ``receptacles`` (3–12): how many receptacle instances the room has (more places to search);
- ``distractors`` (0–8): how many other objects lie about (more to read past);
- ``closed`` (0–6): how many receptacles are closed (objects may hide inside; clipped to the
  openable receptacles the room has).

``room_for(params, seed)`` is deterministic. ``task_for`` draws one of ``VARIANTS`` seeds per
setting, so after a warm-up every game comes from the builder's content-hash cache; games
go to the bridge's data root under ``train/envh-tunable/…`` and are built under a file lock
(pool workers share the folder).
"""

from __future__ import annotations

import contextlib
import fcntl
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from envh import TaskRef, errors

from envh_alfworld import catalogue
from envh_alfworld.catalogue import TASK_TYPES
from envh_alfworld.rooms import Goal, Item, Receptacle, Room, RoomError, validate_room

PARAMETERS: dict[str, dict[str, Any]] = {
    "task_tier": {"low": 1, "high": 6, "default": 6, "harder": 1,
                  "description": "task types drawn from the first N of pick, look, clean, heat, cool, pick two"},
    "receptacles": {"low": 3, "high": 12, "default": 6, "harder": 1,
                    "description": "receptacle instances in the room (more places to search)"},
    "distractors": {"low": 0, "high": 8, "default": 3, "harder": 1,
                    "description": "objects besides the task's own"},
    "closed": {"low": 0, "high": 6, "default": 2, "harder": 1,
               "description": "closed receptacles (clipped to the openable ones in the room)"},
}
VARIANTS = 16  # rooms per parameter setting: a bounded set, built once and then cached
SPLIT = "train"
_STATION = {"pick_clean_then_place_in_recep": ("cleanable", "SinkBasin"),
            "pick_heat_then_place_in_recep": ("heatable", "Microwave"),
            "pick_cool_then_place_in_recep": ("coolable", "Fridge")}
_MAX_COPIES = 4  # instances of one receptacle class ("Drawer 1" … "Drawer 4")


def checked(params: Mapping[str, Any]) -> dict[str, int]:
    """Every parameter, its default filled in, refused when not an integer in bounds."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise errors.UnknownNameError("ALFWorld tunable parameter", unknown[0], list(PARAMETERS))
    out = {}
    for name, spec in PARAMETERS.items():
        value = params.get(name, spec["default"])
        if type(value) is not int or not spec["low"] <= value <= spec["high"]:
            raise errors.SpecError(f"ALFWorld {name} must be an integer in [{spec['low']}, {spec['high']}], "
                                   f"got {value!r}")
        out[name] = value
    return out


def room_for(params: Mapping[str, Any], seed: int, task_types: tuple[str, ...] = TASK_TYPES) -> Room:
    """The room of parameter values ``params`` and ``seed`` (same inputs, same room)."""
    p = checked(params)
    allowed = [t for t in TASK_TYPES if t in task_types]
    if not allowed:
        raise errors.SpecError(f"None of {task_types} is an ALFWorld task type")
    # a bridge limited to harder types than the tier reaches: its easiest type
    types = [t for t in TASK_TYPES[:p["task_tier"]] if t in allowed] or allowed[:1]
    key = ",".join(f"{k}={v}" for k, v in sorted(p.items()))
    rng = random.Random(f"envh-alfworld-tunable-{seed}-{key}")
    task_type = rng.choice(types)
    station = _STATION.get(task_type)
    obj = rng.choice(catalogue.objects_with("pickupable", station[0]) if station
                     else catalogue.objects_with("pickupable"))
    kitchen = any(catalogue.has(obj, a) for a in ("heatable", "coolable", "cleanable"))
    pool = list(catalogue.KITCHEN_RECEPTACLES if kitchen else catalogue.BEDROOM_RECEPTACLES)
    if not kitchen:
        pool.append("Safe")  # bedrooms have one openable class besides drawers
    toggle = "DeskLamp" if task_type == "look_at_obj_in_light" else ""
    needed = [station[1]] if station else []
    if toggle:
        needed.append(rng.choice(catalogue.SURFACES_FOR_LAMPS))
    else:
        needed.append(rng.choice(sorted(k for k in pool if k not in needed)))
    target = "" if toggle else needed[-1]
    needed.append(rng.choice(sorted(k for k in pool if k not in needed)))  # where the object lies
    # fill up to the requested size; openable classes first while closed ones are wanted
    counts: dict[str, int] = {}
    for kind in needed:
        counts[kind] = counts.get(kind, 0) + 1
    openable = [k for k in pool if catalogue.RECEPTACLES[k]]
    while sum(counts.values()) < p["receptacles"]:
        have_open = sum(n for k, n in counts.items() if catalogue.RECEPTACLES[k])
        choices = [k for k in (openable if have_open < p["closed"] else pool)
                   if counts.get(k, 0) < (1 if k in ("Safe", "Fridge", "Microwave", "SinkBasin") else _MAX_COPIES)]
        choices = choices or [k for k in pool if counts.get(k, 0) < _MAX_COPIES]
        kind = rng.choice(sorted(choices))
        counts[kind] = counts.get(kind, 0) + 1
    names = [f"{kind} {n}" for kind in sorted(counts) for n in range(1, counts[kind] + 1)]
    can_close = [n for n in names if catalogue.RECEPTACLES[n.rsplit(" ", 1)[0]]]
    shut = set(rng.sample(can_close, k=min(p["closed"], len(can_close))))
    receps = tuple(Receptacle(name=n, closed=n in shut) for n in names)
    homes = [n for n in names if n.rsplit(" ", 1)[0] != target and (not station or n.rsplit(" ", 1)[0] != station[1])]
    count = 2 if task_type == "pick_two_obj_and_place" else 1
    items = [Item(name=f"{obj} {n}", at=rng.choice(homes)) for n in range(1, count + 1)]
    if toggle:
        surfaces = [n for n in names if n.rsplit(" ", 1)[0] in catalogue.SURFACES_FOR_LAMPS]
        items.append(Item(name=f"{toggle} 1", at=rng.choice(surfaces)))
    others = [k for k in catalogue.objects_with("pickupable") if k != obj]
    items += [Item(name=f"{kind} 1", at=rng.choice(names)) for kind in rng.sample(others, k=p["distractors"])]
    tag = f"t{p['task_tier']}r{p['receptacles']}d{p['distractors']}c{p['closed']}"
    room = Room(name=f"envh-tunable/{tag}/{task_type}-{obj}-{target or toggle}-s{seed}",
                goal=Goal(task_type=task_type, object=obj, receptacle=target, toggle=toggle),
                receptacles=receps, objects=tuple(items))
    validate_room(room)
    return room


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".envh-tunable.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def task_for(bridge: Any, params: Mapping[str, Any], rng: random.Random) -> TaskRef:
    """Build (or reuse) a game for ``params`` in ``bridge``'s data root; its task."""
    from envh_alfworld.builder import BuildError, build_games

    types = tuple(bridge.task_types or TASK_TYPES)
    first = rng.randrange(VARIANTS)
    failures = []
    for k in range(4):  # a room the planner cannot solve: the next variant
        seed = (first + k) % VARIANTS
        try:
            room = room_for(params, seed, types)
            with _locked(Path(bridge.root)):
                game = build_games([room], bridge.root, split=SPLIT)[0]
        except (RoomError, BuildError) as exc:
            failures.append(f"seed {seed}: {exc}"[:300])
            continue
        except OSError as exc:  # the data root cannot take the game (read-only, full)
            raise errors.EnvError(f"Cannot build an ALFWorld game under {bridge.root}: {exc}") from exc
        bridge.list_games(SPLIT, refresh=True)  # the new game is a listed task from now on
        return game.task
    raise errors.EnvError(f"No ALFWorld game could be built for {dict(params)}: {'; '.join(failures)}")
