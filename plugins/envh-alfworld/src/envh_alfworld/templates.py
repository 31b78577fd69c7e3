"""Layer templates for designers: the paper's moves on ALFWorld, as env-spec layer dicts.

Stage templates read the env state right after reset (``env.get_env_state()``; its
``world`` part is ground truth) and return ``{"kind": "stage", "actions": [...],
"observation": "reset"}`` whose commands the engine accepts in order; the policy's first
observation stays the game's own intro (room and task), so a stage changes the world,
not what the policy is told. Contract templates return
``{"kind": "contract", "code": ...}`` with sandbox-safe code. Put them in a spec's
``layers`` (innermost first). ``envh_alfworld.design`` wraps them for the template designer
(the ``envh_templates`` hook); ``TEMPLATES`` lists them with one-line descriptions.
"""

from __future__ import annotations

import re
from typing import Any

_STATIONS = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
_SUBGOAL_FOR_TYPE = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
                     "pick_cool_then_place_in_recep": "cool", "look_at_obj_in_light": "take",
                     "pick_two_obj_and_place": "place_one", "pick_and_place_simple": "take"}


def _do(command: str) -> dict[str, Any]:
    return {"tool": "do", "args": {"command": command}}


def target_object(state: dict[str, Any]) -> str:
    """The first instance of the goal's object class (e.g. ``"mug 1"`` for 'put a hot mug in ...')."""
    objects = sorted(state["world"]["objects"], key=lambda n: (n.rsplit(" ", 1)[0], int(n.rsplit(" ", 1)[1])))
    for name in objects:
        kind = name.rsplit(" ", 1)[0]
        if "lamp" not in kind and re.search(rf"\b{re.escape(kind)}\b", state["goal"]):
            return name
    raise ValueError(f"No object of the goal {state['goal']!r} found in the room")


def target_receptacles(state: dict[str, Any]) -> list[str]:
    """Receptacle instances of the goal's target class (the goal's last word: '... in diningtable')."""
    kind = state["goal"].split()[-1]
    return [r for r in state["room_receptacles"] if r.rsplit(" ", 1)[0] == kind]


def hiding_places(state: dict[str, Any], obj: str | None = None) -> list[str]:
    """Openable receptacles of the room, in its listing order, that can hide ``obj`` (the goal
    object by default): not where it lies now and not of the goal's target class."""
    obj = obj or target_object(state)
    world = state["world"]
    excluded = {world["objects"].get(obj), *target_receptacles(state)}
    openable = set(world["openable"])
    listed = [r for r in state["room_receptacles"] if r in openable]
    listed += sorted(openable - set(listed))
    return [r for r in listed if r not in excluded]


def _fetch(state: dict[str, Any], obj: str, closed: set[str]) -> list[dict[str, Any]]:
    home = state["world"]["objects"].get(obj)
    if home is None:
        raise ValueError(f"Object {obj!r} is not lying in any receptacle")
    steps = [_do(f"go to {home}")]
    if home in closed:
        steps.append(_do(f"open {home}"))
        closed.discard(home)
    return [*steps, _do(f"take {obj} from {home}")]


def _place(obj: str, receptacle: str, closed: set[str]) -> list[dict[str, Any]]:
    steps = [_do(f"go to {receptacle}")]
    if receptacle in closed:
        steps.append(_do(f"open {receptacle}"))
        closed.discard(receptacle)
    return [*steps, _do(f"move {obj} to {receptacle}")]


def hide_target_in_closed_receptacle(state: dict[str, Any], receptacle: str | None = None,
                                     obj: str | None = None) -> dict[str, Any]:
    """Stage: move the goal object into a closed receptacle (a drawer or cabinet if there is
    one), close it, and walk back; the agent must search instead of following the plan.
    Never a receptacle of the goal's target class: putting the object there can finish the
    task during the replay (and it would no longer be hidden from the plan)."""
    obj = obj or target_object(state)
    world = state["world"]
    closed = set(world["closed"])
    home = world["objects"].get(obj)
    options = hiding_places(state, obj)
    if receptacle is None:
        plain = [r for r in options if not r.startswith(("fridge", "microwave"))]
        if not (plain or options):
            raise ValueError("This room has no openable receptacle (other than the object's own place "
                             "and the goal's target) to hide the object in")
        receptacle = sorted(plain or options, key=lambda r: (not r.startswith(("drawer", "cabinet")), r))[0]
    if receptacle not in world["openable"]:
        raise ValueError(f"{receptacle!r} cannot be closed; openable: {world['openable']}")
    if receptacle not in options:
        raise ValueError(f"{receptacle!r} cannot hide {obj!r}: it is the object's place or the goal's target "
                         f"receptacle; hiding places: {options}")
    actions = _fetch(state, obj, closed) + _place(obj, receptacle, closed)
    actions += [_do(f"close {receptacle}"), _do(f"go to {home}")]
    return {"kind": "stage", "actions": actions, "observation": "reset"}


def precomplete_subgoal(state: dict[str, Any], subgoal: str | None = None,
                        obj: str | None = None) -> dict[str, Any]:
    """Stage: do one sub-goal for the agent. ``clean``/``heat``/``cool`` treat the object and
    put it back where it was; ``take`` leaves it in the agent's hands; ``place_one`` puts one
    object already in the target receptacle (pick_two_obj_and_place)."""
    subgoal = subgoal or _SUBGOAL_FOR_TYPE.get(state["task_type"], "take")
    obj = obj or target_object(state)
    closed = set(state["world"]["closed"])
    home = state["world"]["objects"].get(obj)
    actions = _fetch(state, obj, closed)
    if subgoal in _STATIONS:
        stations = [r for r in state["room_receptacles"] if r.startswith(_STATIONS[subgoal] + " ")]
        if not stations:
            raise ValueError(f"No {_STATIONS[subgoal]} in this room to {subgoal} with")
        actions += [_do(f"go to {stations[0]}"), _do(f"{subgoal} {obj} with {stations[0]}")]
        actions += _place(obj, home, closed)
    elif subgoal == "place_one":
        targets = target_receptacles(state)
        if not targets:
            raise ValueError(f"No target receptacle for goal {state['goal']!r}")
        actions += _place(obj, targets[0], closed)
    elif subgoal != "take":
        raise ValueError(f"Unknown subgoal {subgoal!r}: use clean, heat, cool, take or place_one")
    return {"kind": "stage", "actions": actions, "observation": "reset"}


_TRUNCATE = '''def filter_observation(observation, state, memo):
    goal = []
    rest = []
    for line in observation.text.split("\\n"):
        if line.startswith("Your task is to:"):
            goal.append(line)
        elif line.strip():
            rest.append(line.strip())
    # Sentences end at . ! ? (not inside the "-= ... ALFRED! =-" banner) or after the banner.
    words = " ".join(rest).split()
    sentences = []
    current = []
    for i, word in enumerate(words):
        current.append(word)
        following = words[i + 1] if i + 1 < len(words) else ""
        if (word[-1:] in (".", "!", "?") and not following.startswith("=-")) or word.endswith("=-"):
            sentences.append(" ".join(current))
            current = []
    if current:
        sentences.append(" ".join(current))
    short = " ".join(sentences[:LIMIT])
    if goal and observation.text.startswith("Your task is to:"):
        return "\\n".join(goal + [short])
    return "\\n\\n".join([short] + goal)
'''

_BLOCK_GOTO = '''def filter_action(action, state, memo):
    command = " ".join(str(action.args.get("command", "")).lower().split())
    if not command.startswith("go to "):
        return None
    target = command[6:]
    known = state["belief"]["receptacles"]
    if target not in known or known[target]["visited"]:
        return None
    unexplored = [r for r in state["room_receptacles"] if r in known and not known[r]["visited"]]
    if not unexplored or target == unexplored[0]:
        return None
    return Block(reason="no teleporting: go to a place you have visited, or explore the next "
                 "unvisited one in order (" + unexplored[0] + ")")
'''


def truncate_room_description(sentences: int = 2) -> dict[str, Any]:
    """Contract: cut the room description (the first observation, as ALFWorld prints it,
    banner included) to its first ``sentences`` sentences. With 2 the list of receptacles
    disappears: the agent must find places by name or by looking around."""
    if sentences < 1:
        raise ValueError("sentences must be >= 1")
    code = _TRUNCATE.replace("LIMIT", str(int(sentences))).replace(
        "    goal = []\n", "    if \"Welcome to TextWorld\" not in observation.text:\n        return None\n    goal = []\n", 1)
    return {"kind": "contract", "code": code}


def truncate_observation(sentences: int = 2) -> dict[str, Any]:
    """Contract: keep the goal line and only the first ``sentences`` sentences of every game
    text, so what an opened receptacle holds must be asked for (examine)."""
    if sentences < 1:
        raise ValueError("sentences must be >= 1")
    return {"kind": "contract", "code": _TRUNCATE.replace("LIMIT", str(int(sentences)))}


def block_unvisited_goto() -> dict[str, Any]:
    """Contract: block teleport-style ``go to`` an unvisited receptacle, except the next
    unvisited one in the room's listing order (systematic search stays possible)."""
    return {"kind": "contract", "code": _BLOCK_GOTO}


_REVEAL = '''def filter_observation(observation, state, memo):
    where = state["world"]["objects"].get(TARGET)
    hint = "you are carrying it" if where is None else "it is in/on the " + where
    return observation.text + "\\n(Hint: " + TARGET + ": " + hint + ".)"
'''


def reveal_target(obj: str) -> dict[str, Any]:
    """Contract (scaffold): end every observation with where ``obj`` lies (ground truth)."""
    if not re.fullmatch(r"[a-z]+ \d+", obj):
        raise ValueError(f"Not an ALFWorld object name: {obj!r}")
    return {"kind": "contract", "code": _REVEAL.replace("TARGET", repr(obj))}


TEMPLATES: dict[str, str] = {
    "hide_target_in_closed_receptacle": "stage: hide the goal object in a closed receptacle",
    "precomplete_subgoal": "stage: clean/heat/cool/take/place one target object for the agent",
    "truncate_room_description": "contract: cut the room description to its first N sentences",
    "truncate_observation": "contract: keep only the first N sentences of each game text",
    "block_unvisited_goto": "contract: no teleporting to unvisited receptacles out of order",
    "reveal_target": "contract: append where the goal object lies to every observation",
}
