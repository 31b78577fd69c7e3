"""Seeded random rooms: new ALFWorld games of any of the six task types from one integer.

``sample_room(seed)`` draws a task type, a target object and receptacle, a plausible set of
receptacles (kitchen-like for food and dishes, bedroom-like otherwise, plus the station the
task needs: sink basin, microwave or fridge), closes some openable ones, and scatters the
targets and a few distractors. The same seed always gives the same room.
"""

from __future__ import annotations

import random

from envh_alfworld import catalogue
from envh_alfworld.catalogue import TASK_TYPES
from envh_alfworld.rooms import Goal, Item, Receptacle, Room, validate_room

_STATION = {"pick_clean_then_place_in_recep": ("cleanable", "SinkBasin"),
            "pick_heat_then_place_in_recep": ("heatable", "Microwave"),
            "pick_cool_then_place_in_recep": ("coolable", "Fridge")}
_MULTI = {"Cabinet": 3, "Drawer": 3, "Shelf": 2, "CounterTop": 2, "SideTable": 2}


def sample_room(seed: int, task_type: str | None = None, *, name: str | None = None) -> Room:
    """A random, solvable-by-construction room for ``seed`` (and ``task_type`` if given)."""
    rng = random.Random(f"envh-alfworld-room-{seed}-{task_type}")
    task_type = task_type or rng.choice(TASK_TYPES)
    if task_type not in TASK_TYPES:
        raise ValueError(f"Unknown task_type {task_type!r}. Choose one of: {', '.join(TASK_TYPES)}")
    station = _STATION.get(task_type)
    if station:
        obj = rng.choice(catalogue.objects_with("pickupable", station[0]))
    else:
        obj = rng.choice(catalogue.objects_with("pickupable"))
    kitchen = catalogue.has(obj, "heatable") or catalogue.has(obj, "coolable") or catalogue.has(obj, "cleanable")
    pool = list(catalogue.KITCHEN_RECEPTACLES if kitchen else catalogue.BEDROOM_RECEPTACLES)
    kinds = rng.sample(pool, k=min(len(pool), rng.randint(4, 6)))
    toggle = ""
    if task_type == "look_at_obj_in_light":
        toggle = "DeskLamp"
        if not any(k in catalogue.SURFACES_FOR_LAMPS for k in kinds):
            kinds.append(rng.choice(catalogue.SURFACES_FOR_LAMPS))
    if station and station[1] not in kinds:
        kinds.append(station[1])
    # The target receptacle: anything but the station itself.
    target = "" if toggle else rng.choice(sorted(k for k in kinds if not station or k != station[1]))

    receps: list[Receptacle] = []
    for kind in sorted(kinds):
        for n in range(1, rng.randint(1, _MULTI.get(kind, 1)) + 1):
            closed = catalogue.RECEPTACLES[kind] and rng.random() < 0.6
            receps.append(Receptacle(name=f"{kind} {n}", closed=closed))
    homes = [r.name for r in receps if r.name.rsplit(" ", 1)[0] != target]

    items: list[Item] = []
    count = 2 if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    items += [Item(name=f"{obj} {n}", at=rng.choice(homes)) for n in range(1, count + 1)]
    if toggle:
        lamp_homes = [r.name for r in receps if r.name.rsplit(" ", 1)[0] in catalogue.SURFACES_FOR_LAMPS]
        items.append(Item(name=f"{toggle} 1", at=rng.choice(lamp_homes)))
    others = [k for k in catalogue.objects_with("pickupable") if k != obj]
    for kind in rng.sample(others, k=rng.randint(2, 5)):
        items.append(Item(name=f"{kind} 1", at=rng.choice([r.name for r in receps])))

    room_name = name or f"{task_type}-{obj}-None-{target or toggle}-envh/seed_{seed}"
    room = Room(name=room_name, goal=Goal(task_type=task_type, object=obj, receptacle=target, toggle=toggle),
                receptacles=tuple(receps), objects=tuple(items))
    validate_room(room)
    return room


def sample_rooms(seed: int, count: int, task_types: tuple[str, ...] | None = None) -> list[Room]:
    """``count`` rooms from consecutive seeds, cycling through ``task_types`` (default: all six)."""
    types = task_types or TASK_TYPES
    return [sample_room(seed + i, types[i % len(types)]) for i in range(count)]
