"""Shared fixtures: real ALFWorld games built once per session with the package's generator.

Hand-written rooms (one per task type, with known layouts) plus seeded random rooms are
rendered and run through ``alfworld-generate`` in one batch (a few seconds). Without
alfworld installed the tests skip locally and fail in CI (``CI=true``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from envh_alfworld.examples import EXAMPLE_ROOMS

HAND_ROOMS = EXAMPLE_ROOMS
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
def games_root(tmp_path_factory: pytest.TempPathFactory, _alfworld_installed: None) -> Iterator[Path]:
    """An ALFWorld data root holding every test game (hand rooms and random rooms), granted
    to the specs the tests build (``--data``: a spec may name it)."""
    from envh.hostpaths import granted
    from envh_alfworld.builder import build_games
    from envh_alfworld.rooms import room_from_dict
    from envh_alfworld.sampling import sample_rooms

    root = tmp_path_factory.mktemp("alfworld-data")
    rooms = [room_from_dict(r) for r in HAND_ROOMS.values()] + sample_rooms(RANDOM_SEED, 6)
    build_games(rooms, root)
    with granted(root):
        yield root


@pytest.fixture(scope="session")
def hand_rooms() -> dict[str, dict]:
    """The example room descriptions by task type."""
    return EXAMPLE_ROOMS


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
