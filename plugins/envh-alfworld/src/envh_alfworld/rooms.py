"""Compact room descriptions: what a procedurally built ALFWorld game contains.

A :class:`Room` names its receptacles ("Drawer 1", closed or open), its objects and where
they lie, and the task (one of the six ALFRED task types and its targets). It is plain data
(``room_from_dict`` / ``room_to_dict``) so users write rooms as JSON and the game builder
renders them to ALFWorld's own files.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from envh_alfworld import catalogue
from envh_alfworld.catalogue import TASK_TYPES

_INSTANCE = re.compile(r"^([A-Z][A-Za-z]*) ([1-9][0-9]*)$")


class RoomError(ValueError):
    """A room description is malformed or its task cannot be solved in it."""


@attrs.frozen(kw_only=True)
class Receptacle:
    """A receptacle instance such as ``Drawer 1``; ``closed`` only for openable kinds."""

    name: str
    closed: bool = False

    @property
    def kind(self) -> str:
        return self.name.rsplit(" ", 1)[0]


@attrs.frozen(kw_only=True)
class Item:
    """An object instance such as ``Mug 1`` lying in or on receptacle ``at``."""

    name: str
    at: str

    @property
    def kind(self) -> str:
        return self.name.rsplit(" ", 1)[0]


@attrs.frozen(kw_only=True)
class Goal:
    """The ALFRED task: its type, the object class, the target receptacle class, the lamp."""

    task_type: str
    object: str
    receptacle: str = ""
    toggle: str = ""


@attrs.frozen(kw_only=True)
class Room:
    """A whole game: a name (its folder), receptacles, objects and the goal."""

    name: str
    goal: Goal
    receptacles: tuple[Receptacle, ...]
    objects: tuple[Item, ...]


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise RoomError(f"Room field {field} must be a string, got {type(value).__name__} {value!r:.60}")
    return value


def room_from_dict(data: Any) -> Room:
    """Parse the JSON form of a room and validate it; raise :class:`RoomError` naming the field."""
    if not isinstance(data, dict):
        raise RoomError(f"A room description must be a JSON object, got {type(data).__name__}")
    allowed = {"name", "task_type", "object", "receptacle", "toggle", "receptacles", "objects"}
    extra = sorted(map(str, set(data) - allowed))
    if extra:
        raise RoomError(f"Unknown room field(s) {extra}. Allowed: {sorted(allowed)}")
    for key in ("name", "task_type", "object", "receptacles", "objects"):
        if key not in data:
            raise RoomError(f"Room description is missing '{key}'")
    name = _text(data["name"], "name")
    examples = {"receptacles": '{"Drawer 1": {"closed": true}}', "objects": '{"Mug 1": "Desk 1"}'}
    for key, example in examples.items():
        if not isinstance(data[key], dict):
            raise RoomError(f"Room {name!r}: field {key} must be an object such as {example}, "
                            f"got {type(data[key]).__name__}")
    receps = []
    for rname, opts in data["receptacles"].items():
        if opts is None:
            opts = {}
        if not isinstance(opts, dict):
            raise RoomError(f"Room {name!r}: receptacles['{rname}'] must be an object such as "
                            f"{{\"closed\": true}} or {{}}, got {opts!r:.60}")
        if set(opts) - {"closed"}:
            raise RoomError(f"Room {name!r}: receptacles['{rname}']: only 'closed' may be set, got {sorted(map(str, opts))}")
        closed = opts.get("closed", False)
        if not isinstance(closed, bool):
            raise RoomError(f"Room {name!r}: receptacles['{rname}'].closed must be true or false, got {closed!r:.60}")
        receps.append(Receptacle(name=rname, closed=closed))
    items = []
    for iname, at in data["objects"].items():
        items.append(Item(name=iname, at=_text(at, f"objects['{iname}']")))
    goal = Goal(
        task_type=_text(data["task_type"], "task_type"),
        object=_text(data["object"], "object"),
        receptacle=_text(data.get("receptacle") or "", "receptacle"),
        toggle=_text(data.get("toggle") or "", "toggle"),
    )
    room = Room(name=name, goal=goal, receptacles=tuple(receps), objects=tuple(items))
    validate_room(room)
    return room


def room_to_dict(room: Room) -> dict[str, Any]:
    """The JSON form of ``room`` (inverse of :func:`room_from_dict`)."""
    out: dict[str, Any] = {
        "name": room.name,
        "task_type": room.goal.task_type,
        "object": room.goal.object,
        "receptacle": room.goal.receptacle,
        "toggle": room.goal.toggle,
        "receptacles": {r.name: ({"closed": True} if r.closed else {}) for r in room.receptacles},
        "objects": {i.name: i.at for i in room.objects},
    }
    return out


def check_room_name(name: Any) -> None:
    """A room name becomes folders under the split root: a relative path that stays there."""
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or len(name) > 200 or not re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*", name)
            or any(p in (".", "..") or p.startswith(".") for p in parts)
            or "movable" in name or "Sliced" in name):
        raise RoomError(f"Room name {name!r} must be a relative path of [A-Za-z0-9_.-] parts, "
                        "none of them '.', '..' or starting with '.', at most 200 characters "
                        "(and, like ALFWorld, avoid 'movable' and 'Sliced')")


def validate_room(room: Room) -> None:
    """Check names, kinds and that the goal is reachable and not already met."""
    check_room_name(room.name)
    goal = room.goal
    if goal.task_type not in TASK_TYPES:
        raise RoomError(f"Unknown task_type {goal.task_type!r}. Choose one of: {', '.join(TASK_TYPES)}")
    seen: set[str] = set()
    for name in [r.name for r in room.receptacles] + [i.name for i in room.objects]:
        if not _INSTANCE.match(name):
            raise RoomError(f"Instance name {name!r} must look like 'Drawer 1' (Class, space, number)")
        if name in seen:
            raise RoomError(f"Instance {name!r} appears twice")
        seen.add(name)
    receps = {r.name: r for r in room.receptacles}
    for r in room.receptacles:
        if r.kind not in catalogue.RECEPTACLES:
            raise RoomError(f"Unknown receptacle class {r.kind!r}. Choose one of: {', '.join(sorted(catalogue.RECEPTACLES))}")
        if r.closed and not catalogue.RECEPTACLES[r.kind]:
            raise RoomError(f"Receptacle {r.name!r} cannot be closed: {r.kind} is not openable")
    for item in room.objects:
        if item.kind not in catalogue.OBJECTS:
            raise RoomError(f"Unknown object class {item.kind!r}. Choose one of: {', '.join(sorted(catalogue.OBJECTS))}")
        if item.at not in receps:
            raise RoomError(f"Object {item.name!r} lies in unknown receptacle {item.at!r}")
    _validate_goal(room, receps)


def _validate_goal(room: Room, receps: dict[str, Receptacle]) -> None:
    goal = room.goal
    kinds = {r.kind for r in room.receptacles}
    targets = [i for i in room.objects if i.kind == goal.object]
    need = 2 if goal.task_type == "pick_two_obj_and_place" else 1
    if len(targets) < need:
        raise RoomError(f"{goal.task_type} needs {need} {goal.object} object(s) in the room, found {len(targets)}")
    if not catalogue.has(goal.object, "pickupable"):
        raise RoomError(f"{goal.object} cannot be picked up")
    station = {"pick_clean_then_place_in_recep": ("cleanable", "SinkBasin"),
               "pick_heat_then_place_in_recep": ("heatable", "Microwave"),
               "pick_cool_then_place_in_recep": ("coolable", "Fridge")}.get(goal.task_type)
    if station:
        prop, kind = station
        if not catalogue.has(goal.object, prop):
            raise RoomError(f"{goal.task_type}: {goal.object} is not {prop}")
        if kind not in kinds:
            raise RoomError(f"{goal.task_type} needs a {kind} receptacle in the room")
    if goal.task_type == "look_at_obj_in_light":
        if not goal.toggle or not any(i.kind == goal.toggle for i in room.objects):
            raise RoomError(f"look_at_obj_in_light needs toggle= a lamp class present in the room (e.g. DeskLamp), got {goal.toggle!r}")
        if not catalogue.has(goal.toggle, "toggleable"):
            raise RoomError(f"{goal.toggle} is not toggleable")
        for lamp in (i for i in room.objects if i.kind == goal.toggle):
            if receps[lamp.at].closed:
                raise RoomError(f"Lamp {lamp.name!r} lies in closed receptacle {lamp.at!r}: a lamp must "
                                "stand where it can be switched on (put it on a table, desk or shelf)")
        return
    if goal.receptacle not in kinds:
        raise RoomError(f"Target receptacle class {goal.receptacle!r} is not in the room")
    already = sum(1 for i in targets if receps[i.at].kind == goal.receptacle)
    if goal.task_type in ("pick_and_place_simple", "pick_two_obj_and_place") and already >= need:
        raise RoomError(f"The goal is already met: {goal.object} already lies in a {goal.receptacle}")
