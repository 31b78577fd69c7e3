"""Process-wide Docker state: one client per daemon, orphan cleanup once, exit cleanup.

The first client for a daemon removes containers left by killed runs (see
``containers.cleanup_orphans``); sandboxes still open when the interpreter exits are
removed by an ``atexit`` hook, so only a hard kill can leave containers behind, and
the next run's start-up collects those.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

import docker.errors

from .containers import LABEL, Limits, Sandbox, cleanup_orphans, connect

__all__ = ["Limits", "Sandbox", "client", "dispose", "image_exists", "is_snapshot", "remove_image", "track", "untrack"]

_clients: dict[tuple[int, str | None], Any] = {}
_open: set[Sandbox] = set()
_lock = threading.Lock()


def client(base_url: str | None = None) -> Any:
    """The shared client for ``base_url``; the first call cleans up orphans. Keyed by
    pid too: a forked worker must not share its parent's connection pool."""
    key = (os.getpid(), base_url)
    with _lock:
        if key not in _clients:
            c = connect(base_url)
            cleanup_orphans(c)
            _clients[key] = c
        return _clients[key]


def image_exists(c: Any, image: str) -> bool:
    try:
        c.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def is_snapshot(c: Any, image: Any) -> bool:
    """Is ``image`` present and a snapshot this package committed (label ``envh.swebench``)?"""
    if not isinstance(image, str) or not image:
        return False
    try:
        found = c.images.get(image)
    except (docker.errors.ImageNotFound, docker.errors.APIError):
        return False
    return (found.labels or {}).get(LABEL) == "snapshot"


def remove_image(c: Any, image: str) -> bool:
    """Remove an image this package made (a snapshot); False if it was gone or in use."""
    try:
        c.images.remove(image, force=False, noprune=False)
    except (docker.errors.ImageNotFound, docker.errors.NotFound):
        return False
    except docker.errors.APIError:  # a container still runs from it, or a child image
        return False
    return True


def track(box: Sandbox) -> None:
    with _lock:
        _open.add(box)


def untrack(box: Sandbox) -> None:
    with _lock:
        _open.discard(box)


def dispose(box: Sandbox) -> threading.Thread:
    """Close ``box`` in the background (removing a container takes ~0.3 s; the next
    episode need not wait). Join the thread to wait for it."""

    def run() -> None:
        try:
            box.close()
        finally:
            untrack(box)

    thread = threading.Thread(target=run, name=f"dispose-{box.container.name}", daemon=True)
    thread.start()
    return thread


@atexit.register
def _close_all() -> None:
    for box in list(_open):
        try:
            box.close()
        except Exception:  # best effort at exit; start-up cleanup is the backstop
            pass
