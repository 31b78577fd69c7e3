"""Fixtures for the envh-swebench tests: a real Docker daemon and the locally built images.

Without Docker the tests skip on a developer machine but fail under CI (``CI=true``):
a green CI run must have exercised real containers. ``dev/setup.d/docker.sh`` starts
dockerd and builds the images (tests/images/build.sh).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/images holds the test repository's own tests: they run inside containers only.
collect_ignore = ["images"]

IMAGES = Path(__file__).parent / "images"
INSTANCES = IMAGES / "mathx" / "instances.json"
FIX_OLD = "    return ordered[len(ordered) // 2]\n"
FIX_NEW = ("    middle = len(ordered) // 2\n    if len(ordered) % 2 == 0:\n"
           "        return (ordered[middle - 1] + ordered[middle]) / 2\n    return ordered[middle]\n")
BUILD_HINT = "run `PY=.venv/bin/python; source dev/setup.d/docker.sh` from the repository root"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"Docker is required under CI: {reason}", pytrace=False)
    pytest.skip(f"Docker unavailable ({reason}); {BUILD_HINT}")


@pytest.fixture(scope="session")
def docker_client():
    """The shared client of the bridge's runtime (its first use also removes orphans)."""
    try:
        from envh_swebench import runtime
        client = runtime.client()
    except Exception as exc:  # InfraError, or docker not importable
        _unavailable(repr(exc))
    return client


@pytest.fixture(scope="session")
def instances_path(docker_client) -> Iterator[str]:
    """The mathx instance file, after checking its image is built; granted to the specs the
    tests build (``--data``)."""
    from envh.hostpaths import granted
    from envh_swebench.instances import load_instances
    from envh_swebench.runtime import image_exists

    for inst in load_instances(str(INSTANCES)).values():
        if not image_exists(docker_client, inst.image):
            _unavailable(f"image {inst.image} is not built")
    with granted(INSTANCES):
        yield str(INSTANCES)


NOPYTHON_IMAGE = "envh-swebench/mathx-nopython:latest"
ENV_INSTANCES = IMAGES / "mathx-env" / "instances.json"


@pytest.fixture(scope="session")
def env_instances_path(docker_client) -> Iterator[str]:
    """envh__mathx-2: an official-schema row whose tests need its image's environment;
    granted to the specs the tests build."""
    from envh.hostpaths import granted
    from envh_swebench.instances import load_instances
    from envh_swebench.runtime import image_exists

    for inst in load_instances(str(ENV_INSTANCES)).values():
        if not image_exists(docker_client, inst.image):
            _unavailable(f"image {inst.image} is not built")
    with granted(ENV_INSTANCES):
        yield str(ENV_INSTANCES)


@pytest.fixture(scope="session")
def nopython_image(docker_client, instances_path) -> str:
    """The mathx image without python3 (tests/images/nopython)."""
    from envh_swebench.runtime import image_exists

    if not image_exists(docker_client, NOPYTHON_IMAGE):
        _unavailable(f"image {NOPYTHON_IMAGE} is not built")
    return NOPYTHON_IMAGE


@pytest.fixture(scope="session")
def instances_file() -> Path:
    """The mathx instance file, for tests that need no Docker."""
    return INSTANCES


@pytest.fixture(scope="session")
def mathx_row() -> dict:
    return json.loads(INSTANCES.read_text())[0]


@pytest.fixture
def make_env(instances_path):
    """Build SWEBenchEnv instances and close them all after the test."""
    from envh_swebench.bridge import SWEBenchEnv

    made = []

    def factory(**config):
        env = SWEBenchEnv(instances_path, **config)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()


@pytest.fixture
def own_containers(docker_client):
    """A callable listing the containers this test process started and still has."""
    from envh_swebench.containers import LABEL, OWNER_LABEL, owner_token

    def listing() -> list:
        return [c for c in docker_client.containers.list(all=True, filters={"label": LABEL})
                if c.labels.get(OWNER_LABEL) == owner_token()]

    return listing


@pytest.fixture(scope="session")
def fix_action():
    """The editor call that applies the gold fix of envh__mathx-1."""
    from envh import Action

    return Action(tool="str_replace_editor", args={
        "command": "str_replace", "path": "mathx/stats.py", "old_str": FIX_OLD, "new_str": FIX_NEW})
