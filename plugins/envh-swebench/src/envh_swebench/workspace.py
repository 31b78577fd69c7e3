"""A disk bound that holds on any daemon: the episode's writable places are size-limited
tmpfs volumes, and the rest of the container is read-only.

Docker bounds a container's writable layer only where its storage driver can
(``--storage-opt size``: overlay2 on xfs with project quotas, devicemapper, btrfs, zfs).
Elsewhere (overlay2 on ext4, the common case) the episode's container gets instead:

- a read-only root filesystem, so nothing is written to the host's disk at all;
- the repository in a tmpfs volume of ``disk`` bytes, filled from the image's own copy by
  a short-lived helper container before the episode starts;
- ``/tmp`` in a tmpfs volume and ``/root`` and ``/var/tmp`` in tmpfs mounts of ``scratch``
  bytes each.

A write past a bound fails inside the container with ENOSPC ("No space left on
device"). Volumes, not ``--tmpfs`` mounts, hold what the bridge reads and writes through
Docker's archive API (the editor, the submitted diff), which sees only volumes. tmpfs
pages count toward the container's memory cgroup, so its memory limit is raised by what
the tmpfs may hold: the ``memory`` a user sets stays the processes' own.
"""

from __future__ import annotations

import uuid
from typing import Any

import docker.errors
from docker.types import Mount
from envh import errors

MOUNT = "/envh-workspace"  # where the helper sees the volume it fills
SCRATCH_TMPFS = ("/root", "/var/tmp")  # never read through the archive API: plain tmpfs


def inodes(size: int) -> int:
    """Files a tmpfs of ``size`` bytes may hold: one per 16 KiB on average (repositories
    average far more per file), at least 8192. Without a bound, millions of empty files
    cost kernel memory and no bytes."""
    return max(size // 16384, 8192)


def create_volume(client: Any, size: int, labels: dict[str, str], *, mode: str) -> str:
    """A new tmpfs volume of ``size`` bytes; returns its name."""
    name = f"envh-swebench-ws-{uuid.uuid4().hex[:12]}"
    try:
        client.volumes.create(name=name, driver="local", labels=labels, driver_opts={
            "type": "tmpfs", "device": "tmpfs",
            "o": f"size={size},nr_inodes={inodes(size)},mode={mode},nosuid,nodev"})
    except docker.errors.DockerException as exc:
        raise errors.InfraError(f"Could not create a tmpfs volume for the episode's workspace: {exc}") from exc
    return name


def remove_volume(client: Any, name: str) -> None:
    try:
        client.volumes.get(name).remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.DockerException as exc:
        raise errors.InfraError(f"Could not remove volume {name}: {exc}") from exc


def _helper(client: Any, image: str, script: str, workdir: str, volume: str, labels: dict[str, str],
            *, what: str, committed: bool = False, timeout: float = 900) -> Any:
    """Run ``sh -c script workdir`` in a helper container from ``image`` with ``volume`` at
    MOUNT; returns the (stopped) container, for the caller to commit or remove. As the
    entrypoint (an image's own is not wanted here), unless the container is to be
    ``committed``: a snapshot keeps its container's entrypoint, and episodes replace only
    the command."""
    argv = ["sh", "-c", script, workdir]
    how: dict[str, Any] = {"command": argv} if committed else {"entrypoint": argv}
    try:
        helper = client.containers.create(
            image, **how, user="root", network_mode="none", labels=labels,
            name=f"envh-swebench-helper-{uuid.uuid4().hex[:10]}", working_dir="/",
            mounts=[Mount(target=MOUNT, source=volume, type="volume")])
    except docker.errors.DockerException as exc:
        raise errors.InfraError(f"Could not create a container from {image!r} to {what}: {exc}") from exc
    try:
        helper.start()
        code = helper.wait(timeout=timeout).get("StatusCode")
        if code != 0:
            log = helper.logs(tail=20).decode("utf-8", "replace")
            raise errors.InfraError(f"Could not {what} (exit code {code}): {log[-1500:]}")
    except BaseException as exc:
        try:
            helper.remove(force=True)
        except docker.errors.DockerException:
            pass
        if isinstance(exc, errors.InfraError) or not isinstance(exc, Exception):
            raise
        raise errors.InfraError(f"Could not {what}: {exc!r}") from exc
    return helper


def fill(client: Any, image: str, workdir: str, volume: str, labels: dict[str, str]) -> None:
    """Copy the image's ``workdir`` (ownership, modes, links, .git) into ``volume``."""
    script = f'[ -d "$0" ] || {{ echo "$0 is not a directory in the image" >&2; exit 3; }}; cp -a "$0"/. {MOUNT}/'
    helper = _helper(client, image, script, workdir, volume, labels,
                     what=f"copy {workdir} of {image!r} into the episode's workspace "
                          "(a repository larger than `disk` does not fit)")
    try:
        helper.remove(force=True)
    except docker.errors.DockerException:
        pass


def commit(client: Any, image: str, workdir: str, volume: str, labels: dict[str, str],
           repository: str, tag: str, conf: dict[str, Any]) -> str:
    """An image of ``image`` whose ``workdir`` holds the volume's files now: a snapshot a
    later episode fills its workspace from (scratch places start empty)."""
    script = f'find "$0" -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + && cp -a {MOUNT}/. "$0"/'
    helper = _helper(client, image, script, workdir, volume, labels, what="snapshot the workspace", committed=True)
    try:
        made = helper.commit(repository=repository, tag=tag, conf=conf)
    except docker.errors.DockerException as exc:
        raise errors.InfraError(f"docker commit of the workspace failed: {exc}") from exc
    finally:
        try:
            helper.remove(force=True)
        except docker.errors.DockerException:
            pass
    return str(made.id)
