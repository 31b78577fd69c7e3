"""``get_env_state()`` for ALFWorld: the data components and designers read, and its schema.

Two views of the room: ``belief`` (what the agent's own observations revealed, parsed by
rules) and ``world`` (the engine's ground truth from its PDDL facts). Scaffolding
components may reveal ``world`` facts on purpose; pressure components usually act on
``belief``. Everything is plain JSON.
"""

from __future__ import annotations

from typing import Any

_RECEPTACLE_BELIEF = {
    "type": "object",
    "description": "what the agent believes about one receptacle",
    "properties": {
        "visited": {"type": "boolean", "description": "the agent has gone to it (or looked at it)"},
        "open": {"type": ["boolean", "null"], "description": "last seen open (true) / closed (false); null if never seen"},
        "contents": {"type": ["array", "null"], "items": {"type": "string"},
                     "description": "objects last seen in/on it (e.g. 'mug 1'); null if never seen inside"},
    },
}

STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An ALFWorld household game (TextWorld engine). Names are game names such as "
                   "'drawer 1' or 'mug 2'; commands are plain text passed to the do(command) tool.",
    "properties": {
        "task": {"type": ["object", "null"], "description": "TaskRef of the game: suite, split, instance_id"},
        "goal": {"type": "string", "description": "the task sentence, e.g. 'put a hot mug in coffeetable'"},
        "task_type": {"type": "string", "description": "one of the six ALFRED task types, e.g. pick_heat_then_place_in_recep"},
        "room_receptacles": {"type": "array", "items": {"type": "string"},
                             "description": "every receptacle in the order the room description lists them"},
        "location": {"type": ["string", "null"], "description": "the receptacle the agent stands at; null at the start (middle of the room)"},
        "holding": {"type": ["string", "null"], "description": "the object the agent carries, or null"},
        "belief": {
            "type": "object",
            "description": "rule-based belief from the agent's own observations (no ground truth)",
            "properties": {
                "receptacles": {"type": "object", "additionalProperties": _RECEPTACLE_BELIEF,
                                "description": "known receptacles by name"},
                "object_states": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                                  "description": "states the agent caused: 'hot', 'cool', 'clean', 'on', 'off'"},
            },
        },
        "world": {
            "type": "object",
            "description": "ground truth from the engine (the agent has not necessarily seen it)",
            "properties": {
                "objects": {"type": "object", "additionalProperties": {"type": ["string", "null"]},
                            "description": "object -> receptacle it lies in (null when carried)"},
                "openable": {"type": "array", "items": {"type": "string"}, "description": "receptacles that can be opened"},
                "closed": {"type": "array", "items": {"type": "string"}, "description": "openable receptacles now closed"},
                "object_states": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                                  "description": "object -> true states among 'hot', 'cool', 'clean', 'on'"},
            },
        },
        "admissible_commands": {"type": "array", "items": {"type": "string"},
                                "description": "commands the engine accepts now"},
        "last_command": {"type": ["string", "null"], "description": "the last command sent to the engine"},
        "last_feedback": {"type": "string", "description": "the engine's last text"},
        "steps": {"type": "integer", "description": "do() calls since reset, or since a stage replay finished"},
        "max_steps": {"type": ["integer", "null"], "description": "step budget (truncation), null if none"},
        "repeats": {"type": "integer", "description": "how many observations in a row equalled the one before"},
        "max_repeats": {"type": ["integer", "null"], "description": "truncate after this many identical observations in a row"},
        "won": {"type": "boolean", "description": "the game's own goal check (the verifier)"},
        "done": {"type": "boolean", "description": "the episode ended (won, or truncated by a budget)"},
    },
}

_STATE_FACTS = {"ishot": "hot", "iscool": "cool", "isclean": "clean", "ison": "on"}


def world_view(engine_env: Any) -> dict[str, Any]:
    """Ground truth from the PDDL engine under alfworld's wrappers: objects, closed, states."""
    pddl = engine_env
    while getattr(pddl, "_wrapped_env", None) is not None:
        pddl = pddl._wrapped_env
    names = {k: info.name.strip() for k, info in pddl._entity_infos.items()}
    objects: dict[str, str | None] = {}
    openable: set[str] = set()
    opened: set[str] = set()
    states: dict[str, list[str]] = {}
    for fact in pddl._pddl_state.facts:
        args = [names.get(a.name, a.name) for a in fact.arguments]
        if fact.name == "inreceptacle":
            objects[args[0]] = args[1]
        elif fact.name == "holds":
            objects[args[1]] = None
        elif fact.name == "openable":
            openable.add(args[0])
        elif fact.name == "opened":
            opened.add(args[0])
        elif fact.name in _STATE_FACTS:
            states.setdefault(args[0], []).append(_STATE_FACTS[fact.name])
    return {
        "objects": dict(sorted(objects.items())),
        "openable": sorted(openable),
        "closed": sorted(openable - opened),
        "object_states": {k: sorted(v) for k, v in sorted(states.items())},
    }
