"""Render a :class:`~envh_alfworld.rooms.Room` to ALFWorld's source files.

ALFWorld builds a game from ``traj_data.json`` (task type and targets) and
``initial_state.pddl`` (a PDDL problem over its ``alfred`` domain). Entity ids follow
ALFRED's mangling (``Mug_bar_...``) so alfworld's own demangler names them "mug 1"; the
demangler numbers instances in reverse sorted order, so ids are chosen to make "Mug 1" in
the description come out as "mug 1" in the game.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from envh_alfworld import catalogue
from envh_alfworld.rooms import Room

_START = "loc_bar_start"


def entity_ids(room: Room) -> dict[str, str]:
    """Map every instance name ("Drawer 2") to its PDDL id, preserving the game's numbering."""
    by_kind: dict[str, list[int]] = defaultdict(list)
    names = [r.name for r in room.receptacles] + [i.name for i in room.objects]
    for name in names:
        kind, number = name.rsplit(" ", 1)
        by_kind[kind].append(int(number))
    ids: dict[str, str] = {}
    for kind, nums in by_kind.items():
        # alfworld.agents.utils.misc.Demangler pops numbers from the end of [1..n] while
        # walking ids in sorted order: the k-th smallest id gets n-k. Rank accordingly.
        ordered = sorted(nums, reverse=True)
        for rank, num in enumerate(ordered):
            ids[f"{kind} {num}"] = _mangle(kind, rank)
    return ids


def _mangle(kind: str, rank: int) -> str:
    # PDDL ids are lower-cased by the translator and the demangler appends "basin" to
    # any id containing it; ALFRED spells sink basins "Sink_bar_..._bar_SinkBasin".
    if kind.endswith("Basin"):
        return f"{kind[:-5]}_bar_{rank:04d}_bar_{kind}"
    return f"{kind}_bar_{rank:04d}"


def _goal_pddl(room: Room) -> str:
    import alfworld.gen.goal_library as glib  # cheap: pure data

    goal = room.goal
    text = glib.gdict[goal.task_type]["pddl"].format(
        obj=goal.object, recep=goal.receptacle, toggle=goal.toggle, mrecep="")
    return text.replace("#", "-")


def render_problem(room: Room) -> str:
    """The ``initial_state.pddl`` text for ``room``."""
    ids = entity_ids(room)
    recep_loc = {r.name: f"loc_bar_{i + 1}" for i, r in enumerate(room.receptacles)}
    rtypes = sorted({r.kind for r in room.receptacles} | {room.goal.receptacle} - {""})
    otypes = sorted({i.kind for i in room.objects} | {room.goal.object, room.goal.toggle} - {""})

    objs = ["agent1 - agent"]
    objs += [f"{t}Type - otype" for t in otypes]
    objs += [f"{t}Type - rtype" for t in rtypes]
    objs += [f"{ids[i.name]} - object" for i in room.objects]
    objs += [f"{ids[r.name]} - receptacle" for r in room.receptacles]
    objs += [f"{_START} - location"] + [f"{loc} - location" for loc in recep_loc.values()]

    init = [f"(atLocation agent1 {_START})"]
    for r in room.receptacles:
        rid = ids[r.name]
        init.append(f"(receptacleType {rid} {r.kind}Type)")
        init.append(f"(receptacleAtLocation {rid} {recep_loc[r.name]})")
        if catalogue.RECEPTACLES[r.kind]:
            init.append(f"(openable {rid})")
            if not r.closed:
                init.append(f"(opened {rid})")
    pickable = sorted({i.kind for i in room.objects if catalogue.has(i.kind, "pickupable")})
    for rt in sorted({r.kind for r in room.receptacles}):
        init += [f"(canContain {rt}Type {ot}Type)" for ot in pickable]
    for item in room.objects:
        oid = ids[item.name]
        init.append(f"(objectType {oid} {item.kind}Type)")
        for prop in sorted(catalogue.OBJECTS[item.kind]):
            init.append(f"({prop} {oid})")
        init.append(f"(inReceptacle {oid} {ids[item.at]})")
        init.append(f"(objectAtLocation {oid} {recep_loc[item.at]})")

    problem_name = "plan_" + room.name.replace("/", "_").replace("-", "_")
    lines = [f"(define (problem {problem_name})", "(:domain alfred)", "(:objects"]
    lines += [f"    {o}" for o in objs]
    lines += ["    )", "(:init"]
    lines += [f"    {f}" for f in init]
    lines += ["    )", _goal_pddl(room).strip(), ""]
    return "\n".join(lines)


def render_traj_data(room: Room) -> dict[str, Any]:
    """The ``traj_data.json`` content: what ``alfworld-generate`` and ``list_tasks`` read."""
    from envh_alfworld.rooms import room_to_dict

    goal = room.goal
    return {
        "task_type": goal.task_type,
        "task_id": room.name,
        "pddl_params": {
            "object_target": goal.object,
            "parent_target": goal.receptacle,
            "toggle_target": goal.toggle,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "turk_annotations": {"anns": []},
        "envh_room": room_to_dict(room),
    }
