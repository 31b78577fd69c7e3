"""Example rooms, one per ALFRED task type, with small known layouts.

Handy as a starting point for your own room files (``envh alfworld make-games --examples``)
and used by the plugin's tests. Each value is the JSON form read by
``envh_alfworld.rooms.room_from_dict``.
"""

from __future__ import annotations

from typing import Any

EXAMPLE_ROOMS: dict[str, dict[str, Any]] = {
    "pick_and_place_simple": {
        "name": "pick_and_place_simple-Mug-None-Desk-envh/example", "task_type": "pick_and_place_simple",
        "object": "Mug", "receptacle": "Desk",
        "receptacles": {"CounterTop 1": {}, "Desk 1": {}, "Drawer 1": {"closed": True},
                        "Drawer 2": {"closed": True}, "Shelf 1": {}},
        "objects": {"Mug 1": "CounterTop 1", "Pen 1": "Drawer 1", "Book 1": "Shelf 1"}},
    "look_at_obj_in_light": {
        "name": "look_at_obj_in_light-Book-None-DeskLamp-envh/example", "task_type": "look_at_obj_in_light",
        "object": "Book", "toggle": "DeskLamp",
        "receptacles": {"Bed 1": {}, "Drawer 1": {"closed": True}, "SideTable 1": {}, "Shelf 1": {}},
        "objects": {"Book 1": "Shelf 1", "DeskLamp 1": "SideTable 1", "CellPhone 1": "Bed 1"}},
    "pick_clean_then_place_in_recep": {
        "name": "pick_clean_then_place_in_recep-Plate-None-DiningTable-envh/example",
        "task_type": "pick_clean_then_place_in_recep", "object": "Plate", "receptacle": "DiningTable",
        "receptacles": {"Cabinet 1": {"closed": True}, "DiningTable 1": {}, "SinkBasin 1": {}, "CounterTop 1": {}},
        "objects": {"Plate 1": "Cabinet 1", "Fork 1": "CounterTop 1"}},
    "pick_heat_then_place_in_recep": {
        "name": "pick_heat_then_place_in_recep-Potato-None-DiningTable-envh/example",
        "task_type": "pick_heat_then_place_in_recep", "object": "Potato", "receptacle": "DiningTable",
        "receptacles": {"CounterTop 1": {}, "DiningTable 1": {}, "Microwave 1": {"closed": True},
                        "Drawer 1": {"closed": True}},
        "objects": {"Potato 1": "CounterTop 1", "Spoon 1": "Drawer 1"}},
    "pick_cool_then_place_in_recep": {
        "name": "pick_cool_then_place_in_recep-Tomato-None-CounterTop-envh/example",
        "task_type": "pick_cool_then_place_in_recep", "object": "Tomato", "receptacle": "CounterTop",
        "receptacles": {"CounterTop 1": {}, "DiningTable 1": {}, "Fridge 1": {"closed": True}},
        "objects": {"Tomato 1": "DiningTable 1", "Egg 1": "Fridge 1"}},
    "pick_two_obj_and_place": {
        "name": "pick_two_obj_and_place-Pen-None-Desk-envh/example", "task_type": "pick_two_obj_and_place",
        "object": "Pen", "receptacle": "Desk",
        "receptacles": {"Desk 1": {}, "Drawer 1": {"closed": True}, "Shelf 1": {}, "Shelf 2": {}},
        "objects": {"Pen 1": "Drawer 1", "Pen 2": "Shelf 2", "Pencil 1": "Shelf 1"}},
}
