"""Two runs on one host each remove orphaned sandboxes at start-up: a container the other
run removes between the listing and the look at its labels is skipped, not an error."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def test_a_container_removed_during_cleanup_is_skipped(docker_ready, monkeypatch) -> None:
    from envh_office import sandbox

    client = sandbox.client()
    dead_owner = {sandbox.LABEL: "1", sandbox.OWNER_LABEL: f"{socket.gethostname()}:999999999:1"}
    gone = client.containers.create(sandbox.IMAGE, command="true", labels=dead_owner, network_mode="none")
    kept = client.containers.create(sandbox.IMAGE, command="true", labels=dead_owner, network_mode="none")
    inspect = client.api.inspect_container

    def late(container_id: str, *args: Any, **kwargs: Any) -> Any:
        if container_id == gone.id:  # another run's cleanup removes it between list and inspect
            client.api.remove_container(gone.id, force=True)
        return inspect(container_id, *args, **kwargs)

    monkeypatch.setattr(client.api, "inspect_container", late)
    try:
        removed = sandbox.cleanup_orphans(client)
        assert kept.name in removed and gone.name not in removed
    finally:
        monkeypatch.undo()
        for box in (gone, kept):
            try:
                box.remove(force=True)
            except Exception:  # noqa: BLE001 - removed by the test already
                pass
    with pytest.raises(Exception, match="No such container|404"):
        client.containers.get(kept.id)
