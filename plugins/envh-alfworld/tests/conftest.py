"""Shared fixtures: real ALFWorld games built once per session with the package's generator.

Hand-written rooms (one per task type, with known layouts) plus seeded random rooms are
rendered and run through ``alfworld-generate`` in one batch (a few seconds). Without
alfworld installed the tests skip locally and fail in CI (``CI=true``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

HAND_ROOMS: dict[str, dict] = {
    "pick_and_place_simple": {
        "name": "pick_and_place_simple-Mug-None-Desk-envh/hand", "task_type": "pick_and_place_simple",
        "object": "Mug", "receptacle": "Desk",
        "receptacles": {"CounterTop 1": {}, "Desk 1": {}, "Drawer 1": {"closed": True},
                        "Drawer 2": {"closed": True}, "Shelf 1": {}},
        "objects": {"Mug 1": "CounterTop 1", "Pen 1": "Drawer 1", "Book 1": "Shelf 1"}},
    "look_at_obj_in_light": {
        "name": "look_at_obj_in_light-Book-None-DeskLamp-envh/hand", "task_type": "look_at_obj_in_light",
        "object": "Book", "toggle": "DeskLamp",
        "receptacles": {"Bed 1": {}, "Drawer 1": {"closed": True}, "SideTable 1": {}, "Shelf 1": {}},
        "objects": {"Book 1": "Shelf 1", "DeskLamp 1": "SideTable 1", "CellPhone 1": "Bed 1"}},
    "pick_clean_then_place_in_recep": {
        "name": "pick_clean_then_place_in_recep-Plate-None-DiningTable-envh/hand",
        "task_type": "pick_clean_then_place_in_recep", "object": "Plate", "receptacle": "DiningTable",
        "receptacles": {"Cabinet 1": {"closed": True}, "DiningTable 1": {}, "SinkBasin 1": {}, "CounterTop 1": {}},
        "objects": {"Plate 1": "Cabinet 1", "Fork 1": "CounterTop 1"}},
    "pick_heat_then_place_in_recep": {
        "name": "pick_heat_then_place_in_recep-Potato-None-DiningTable-envh/hand",
        "task_type": "pick_heat_then_place_in_recep", "object": "Potato", "receptacle": "DiningTable",
        "receptacles": {"CounterTop 1": {}, "DiningTable 1": {}, "Microwave 1": {"closed": True},
                        "Drawer 1": {"closed": True}},
        "objects": {"Potato 1": "CounterTop 1", "Spoon 1": "Drawer 1"}},
    "pick_cool_then_place_in_recep": {
        "name": "pick_cool_then_place_in_recep-Tomato-None-CounterTop-envh/hand",
        "task_type": "pick_cool_then_place_in_recep", "object": "Tomato", "receptacle": "CounterTop",
        "receptacles": {"CounterTop 1": {}, "DiningTable 1": {}, "Fridge 1": {"closed": True}},
        "objects": {"Tomato 1": "DiningTable 1", "Egg 1": "Fridge 1"}},
    "pick_two_obj_and_place": {
        "name": "pick_two_obj_and_place-Pen-None-Desk-envh/hand", "task_type": "pick_two_obj_and_place",
        "object": "Pen", "receptacle": "Desk",
        "receptacles": {"Desk 1": {}, "Drawer 1": {"closed": True}, "Shelf 1": {}, "Shelf 2": {}},
        "objects": {"Pen 1": "Drawer 1", "Pen 2": "Shelf 2", "Pencil 1": "Shelf 1"}},
}
RANDOM_SEED = 100


def _have_alfworld() -> bool:
    return all(importlib.util.find_spec(m) for m in ("alfworld", "textworld", "fast_downward"))


@pytest.fixture(scope="session", autouse=True)
def _alfworld_installed() -> None:
    if not _have_alfworld():
        message = "alfworld (with textworld[pddl] and fast-downward) is not installed: dev/setup.d/alfworld.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def games_root(tmp_path_factory: pytest.TempPathFactory, _alfworld_installed: None) -> Path:
    """An ALFWorld data root holding every test game (hand rooms and random rooms)."""
    from envh_alfworld.builder import build_games
    from envh_alfworld.rooms import room_from_dict
    from envh_alfworld.sampling import sample_rooms

    root = tmp_path_factory.mktemp("alfworld-data")
    rooms = [room_from_dict(r) for r in HAND_ROOMS.values()] + sample_rooms(RANDOM_SEED, 6)
    build_games(rooms, root)
    return root


@pytest.fixture(scope="session")
def built(games_root: Path) -> dict[str, object]:
    """Hand games by task type (``BuiltGame``), read back from the cache (no rebuild)."""
    from envh_alfworld.builder import build_games
    from envh_alfworld.rooms import room_from_dict

    games = build_games([room_from_dict(r) for r in HAND_ROOMS.values()], games_root)
    return {g.task_type: g for g in games}


@pytest.fixture
def make_env(games_root: Path):
    """Factory of bridges on the test data; every env made is closed after the test."""
    from envh_alfworld.bridge import AlfworldEnv

    made = []

    def factory(**config):
        env = AlfworldEnv(data_path=str(games_root), **config)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()
