"""What the game builder knows about ALFRED classes: openable receptacles, object affordances.

A small, explicit subset of ALFRED's classes (names as in ALFRED, so goals read like the
official games: "put a hot mug in coffeetable"). Affordances map to the PDDL predicates of
alfworld's domain (``pickupable``, ``cleanable``, ``heatable``, ``coolable``, ``toggleable``).
"""

from __future__ import annotations

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

# receptacle class -> openable
RECEPTACLES: dict[str, bool] = {
    "Cabinet": True,
    "Drawer": True,
    "Fridge": True,
    "Microwave": True,
    "Safe": True,
    "CounterTop": False,
    "DiningTable": False,
    "CoffeeTable": False,
    "SideTable": False,
    "Desk": False,
    "Dresser": False,
    "Shelf": False,
    "Bed": False,
    "Sofa": False,
    "ArmChair": False,
    "GarbageCan": False,
    "StoveBurner": False,
    "SinkBasin": False,
}

_FOOD = {"pickupable", "cleanable", "heatable", "coolable"}
_DISH = {"pickupable", "cleanable", "heatable", "coolable"}
_TOOL = {"pickupable", "cleanable"}
_THING = {"pickupable"}

# object class -> affordances
OBJECTS: dict[str, frozenset[str]] = {
    "Apple": frozenset(_FOOD),
    "Potato": frozenset(_FOOD),
    "Tomato": frozenset(_FOOD),
    "Egg": frozenset(_FOOD),
    "Bread": frozenset({"pickupable", "heatable", "coolable"}),
    "Lettuce": frozenset({"pickupable", "cleanable", "coolable"}),
    "Mug": frozenset(_DISH),
    "Cup": frozenset(_DISH),
    "Plate": frozenset(_DISH),
    "Bowl": frozenset({"pickupable", "cleanable", "coolable"}),
    "Pan": frozenset({"pickupable", "cleanable", "coolable"}),
    "Pot": frozenset({"pickupable", "cleanable", "coolable"}),
    "Fork": frozenset(_TOOL),
    "Spoon": frozenset(_TOOL),
    "Knife": frozenset(_TOOL),
    "Spatula": frozenset(_TOOL),
    "Ladle": frozenset(_TOOL),
    "DishSponge": frozenset(_TOOL),
    "Book": frozenset(_THING),
    "Pen": frozenset(_THING),
    "Pencil": frozenset(_THING),
    "CellPhone": frozenset(_THING),
    "KeyChain": frozenset(_THING),
    "CreditCard": frozenset(_THING),
    "CD": frozenset(_THING),
    "AlarmClock": frozenset(_THING),
    "Pillow": frozenset(_THING),
    "Vase": frozenset(_THING),
    "Statue": frozenset(_THING),
    "RemoteControl": frozenset(_THING),
    "Watch": frozenset(_THING),
    "DeskLamp": frozenset({"toggleable"}),
    "FloorLamp": frozenset({"toggleable"}),
}

# Plausible homes, used only when sampling random rooms.
KITCHEN_RECEPTACLES = ("CounterTop", "DiningTable", "Cabinet", "Drawer", "Shelf", "StoveBurner", "GarbageCan")
BEDROOM_RECEPTACLES = ("Desk", "SideTable", "Dresser", "Shelf", "Drawer", "Bed", "Sofa", "ArmChair", "CoffeeTable")
SURFACES_FOR_LAMPS = ("Desk", "SideTable", "Dresser")


def has(kind: str, affordance: str) -> bool:
    """Whether object class ``kind`` has ``affordance`` (e.g. ``"heatable"``)."""
    return affordance in OBJECTS.get(kind, frozenset())


def objects_with(*affordances: str) -> list[str]:
    """Object classes having every affordance, sorted (stable for seeded sampling)."""
    return sorted(k for k, props in OBJECTS.items() if set(affordances) <= props)
