"""Two runs on one host each remove orphaned containers at start-up: a container the other
run removes between the listing and the look at its labels is skipped, not an error that
stops this run (found when the suite ran its modules in parallel)."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def _removed_while_listed(client: Any, doomed: str) -> None:
    """Make the daemon's next inspect of ``doomed`` come after its real removal, as when
    another run's cleanup removes it between the listing and the inspect."""
    inspect = client.api.inspect_container

    def late(container_id: str, *args: Any, **kwargs: Any) -> Any:
        if container_id == doomed:
            client.api.remove_container(doomed, force=True)
        return inspect(container_id, *args, **kwargs)

    client.api.inspect_container = late


def test_a_container_removed_during_cleanup_is_skipped(docker_client, instances_path, monkeypatch) -> None:
    from envh_swebench.containers import LABEL, OWNER_LABEL, cleanup_orphans
    from envh_swebench.instances import load_instances

    image = next(iter(load_instances(instances_path).values())).image
    dead_owner = {LABEL: "episode", OWNER_LABEL: f"{socket.gethostname()}:999999999:1"}
    gone = docker_client.containers.create(image, command="true", labels=dead_owner, network_mode="none")
    kept = docker_client.containers.create(image, command="true", labels=dead_owner, network_mode="none")
    try:
        monkeypatch.setattr(docker_client.api, "inspect_container", docker_client.api.inspect_container)
        _removed_while_listed(docker_client, gone.id)
        removed = cleanup_orphans(docker_client)
        assert kept.name in removed and gone.name not in removed
    finally:
        for box in (gone, kept):
            try:
                box.remove(force=True)
            except Exception:  # noqa: BLE001 - removed by the test already
                pass
    with pytest.raises(Exception, match="No such container|404"):
        docker_client.containers.get(kept.id)
