"""Fixtures for the envh-swebench tests: a real Docker daemon and the locally built images.

Without Docker the tests skip on a developer machine but fail under CI (``CI=true``):
a green CI run must have exercised real containers. ``dev/setup.d/docker.sh`` starts
dockerd and builds the images (tests/images/build.sh).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# tests/images holds the test repository's own tests: they run inside containers only.
collect_ignore = ["images"]

IMAGES = Path(__file__).parent / "images"
INSTANCES = IMAGES / "mathx" / "instances.json"
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
def instances_path(docker_client) -> str:
    """The mathx instance file, after checking its image is built."""
    from envh_swebench.instances import load_instances
    from envh_swebench.runtime import image_exists

    for inst in load_instances(str(INSTANCES)).values():
        if not image_exists(docker_client, inst.image):
            _unavailable(f"image {inst.image} is not built")
    return str(INSTANCES)


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


def own_containers(client) -> list:
    """Containers this test process started and has not removed."""
    from envh_swebench.containers import LABEL, OWNER_LABEL, owner_token

    return [c for c in client.containers.list(all=True, filters={"label": LABEL})
            if c.labels.get(OWNER_LABEL) == owner_token()]
