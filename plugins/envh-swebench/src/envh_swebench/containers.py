"""Docker plumbing: one labelled, resource-limited container per episode.

Every container carries the label ``envh.swebench`` and an owner token (host, pid and
the pid's start time), so a later process can tell the containers of a killed run from
those of a live one and remove only the former (``cleanup_orphans``). Docker failures
become ``envh.errors.InfraError``: they are never the policy's fault.
"""

from __future__ import annotations

import io
import os
import re
import socket
import tarfile
import time
import uuid
from typing import Any

import attrs
import docker
import docker.errors
from envh import errors

from .session import RunnerSession

LABEL = "envh.swebench"
OWNER_LABEL = "envh.swebench.owner"
INSTANCE_LABEL = "envh.swebench.instance"


def _start_time(pid: int) -> str:
    """Start time of ``pid`` in clock ticks (field 22 of /proc/PID/stat), '' if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _owner_alive(token: str) -> bool:
    host, _, rest = token.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's container: not ours to judge
    return _start_time(int(pid)) == started != ""


def _probe_unix_socket(url: str) -> None:
    """Fail fast, without leaking a socket, when a unix daemon socket does not answer
    (the SDK's unix transport leaves its socket open when the connect fails)."""
    if not url.startswith(("unix://", "http+unix://")):
        return
    path = url.split("://", 1)[1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        probe.connect(path)


def connect(base_url: str | None = None, timeout: float = 120) -> docker.DockerClient:
    """A client for the daemon at ``base_url`` (default: the environment's DOCKER_HOST)."""
    client = None
    url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        _probe_unix_socket(url)
    except OSError as exc:
        raise errors.InfraError(
            f"Cannot reach the Docker daemon at {url}: {exc}. Start dockerd "
            "(dev/setup.d/docker.sh does) or set docker_url.") from exc
    try:
        client = (docker.DockerClient(base_url=base_url, timeout=timeout) if base_url
                  else docker.from_env(timeout=timeout))
        client.ping()
    except docker.errors.DockerException as exc:
        if client is not None:
            client.close()
        raise errors.InfraError(
            f"Cannot reach the Docker daemon ({base_url or os.environ.get('DOCKER_HOST', 'default socket')}): "
            f"{exc}. Start dockerd (dev/setup.d/docker.sh does) or set docker_url.") from exc
    return client


def cleanup_orphans(client: docker.DockerClient) -> list[str]:
    """Remove envh-swebench containers, then their workspace volumes, whose owning process
    on this host is gone. A container another run removes meanwhile is skipped (two runs on
    one host each clean up at start-up)."""
    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        if _owner_alive(c.labels.get(OWNER_LABEL, "")):
            continue
        try:
            c.remove(force=True)
            removed.append(c.name)
        except docker.errors.NotFound:
            pass
    for v in client.volumes.list(filters={"label": LABEL}):
        if _owner_alive((v.attrs.get("Labels") or {}).get(OWNER_LABEL, "")):
            continue
        try:
            v.remove(force=True)
            removed.append(v.name)
        except docker.errors.DockerException:  # gone, or still mounted by a live container
            pass
    return removed


_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# Episode containers keep only what a developer's shell in a repository needs: file
# ownership and permission changes, signals to its own processes, setuid tools (su).
EPISODE_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]


def parse_size(text: str | int | None) -> int | None:
    """``"2g"`` -> bytes; None stays None."""
    if text is None or isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)b?\s*", str(text).lower())
    if not m:
        raise errors.SpecError(f"Not a size: {text!r} (use e.g. 512m, 2g)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def _path_problem(exc: Exception) -> bool:
    """Does a daemon error say the path itself is bad (not the daemon or container)?"""
    text = str(exc).lower()
    return any(m in text for m in ("not a directory", "file name too long", "no such file", "invalid argument"))


class SnapshotTooLargeError(errors.EnvhError):
    """A snapshot would write more to the host's disk than the episode's disk bound."""

    def __init__(self, size: int | None, limit: int) -> None:
        super().__init__(f"Not snapshotting: the files to keep hold {'an unknown number of' if size is None else size} "
                         f"bytes (apparent size), over the {limit} the disk bound allows")


class NotRegularFileError(OSError):
    """The path is a FIFO, a device or a link, not a regular file."""


class NoSpaceError(OSError):
    """A write through the archive API found the workspace full (ENOSPC)."""


class FileTooLargeError(OSError):
    """A file is larger than the caller is willing to read."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"{path} holds {size} bytes, more than the {limit} allowed")
        self.path, self.size, self.limit = path, size, limit


# The python-less fallback's sweep, in POSIX sh builtins only (a command it started would
# show up among the processes it kills): stop, then kill, every process but those in
# $KEEP (the container's own, found before the first command) and itself, until none is
# left; zombies are skipped (their parent, the container's init, reaps them) unless other
# threads of theirs still run (a main thread that exited leaves its process looking dead).
_SH_PIDS = 'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = "$$" ] || printf "%s " "$p"; done'
_SH_SWEEP = (
    'strays() { out=""; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = "$$" ] && continue; '
    'case " $KEEP " in *" $p "*) continue ;; esac; read -r st 2>/dev/null < "$d/stat" || continue; '
    'st=${st##*\\) }; case "$st" in Z*|X*) set -- "$d"/task/[0-9]*; [ $# -gt 1 ] || continue ;; esac; '
    'out="$out $p"; done; }; '  # a zombie leader with live threads is a running process
    'i=0; while [ $i -lt 50 ]; do strays; [ -z "$out" ] && break; '
    'for p in $out; do kill -STOP "$p" 2>/dev/null; done; for p in $out; do kill -KILL "$p" 2>/dev/null; done; '
    'i=$((i + 1)); done')

_STORAGE_OPT: dict[int, bool] = {}


def _storage_opt_supported(client: docker.DockerClient) -> bool:
    """Can the daemon bound a container's writable layer (``--storage-opt size``)?
    overlay2 only on xfs mounted with pquota; devicemapper, btrfs and zfs always."""
    key = id(client)
    if key not in _STORAGE_OPT:
        try:
            info = client.info()
        except docker.errors.DockerException:
            info = {}
        driver = info.get("Driver", "")
        status = dict(info.get("DriverStatus") or [])
        _STORAGE_OPT[key] = driver in ("devicemapper", "btrfs", "zfs") or (
            driver == "overlay2" and status.get("Backing Filesystem") == "xfs")
    return _STORAGE_OPT[key]


DISK_MODES = ("auto", "storage-opt", "tmpfs", "check")


@attrs.frozen(kw_only=True)
class Limits:
    """Resource limits of a container. None: no limit (run_instance sets none).
    ``disk`` bounds what the episode writes, by ``disk_mode``:
    ``storage-opt``: the daemon caps the writable layer (overlay2 on xfs with pquota,
    devicemapper, btrfs, zfs); ``tmpfs``: a read-only root with the repository in a tmpfs
    volume of ``disk`` bytes and ``scratch`` bytes for each of /tmp, /root, /var/tmp (see
    ``workspace``); ``check``: no file larger than ``disk`` (RLIMIT_FSIZE) and the layer's
    size checked after each command, not a bound within one step; ``auto``: storage-opt
    where the daemon can, else tmpfs.
    ``shm``: the size of /dev/shm (Docker's own default is 64m); like every tmpfs it is
    memory, so with a tmpfs workspace the memory limit grows by it and by Docker's fixed
    64m /dev. POSIX message queues (/dev/mqueue, not a tmpfs) are bounded per container
    by RLIMIT_MSGQUEUE, set to ``MQUEUE_BYTES``.
    ``hardened``: no-new-privileges, every capability dropped but ``EPISODE_CAPS``.
    ``cap_add``: extra capabilities (evaluation adds SYS_ADMIN only when configured to)."""

    cpus: float | None = 1.0
    memory: str | None = "2g"
    pids: int | None = 512
    network: bool = False
    disk: str | None = "4g"
    disk_mode: str = "auto"
    scratch: str = "512m"
    shm: str | None = "64m"
    hardened: bool = True
    cap_add: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.disk_mode not in DISK_MODES:
            raise errors.SpecError(f"Unknown disk_mode {self.disk_mode!r}. Choose one of: {', '.join(DISK_MODES)}")
        for name in ("memory", "disk", "scratch", "shm"):
            size = parse_size(getattr(self, name))
            if size is not None and size < 2**20:
                raise errors.SpecError(f"{name} {getattr(self, name)!r} is under 1m: too small to run a repository")

    @property
    def disk_bytes(self) -> int | None:
        return parse_size(self.disk)

    def mode_for(self, client: docker.DockerClient) -> str | None:
        """The disk bound this daemon gives: None (no ``disk``), or a concrete mode."""
        if not self.disk_bytes:
            return None
        if self.disk_mode == "auto":
            return "storage-opt" if _storage_opt_supported(client) else "tmpfs"
        if self.disk_mode == "storage-opt" and not _storage_opt_supported(client):
            raise errors.InfraError(
                "disk_mode 'storage-opt' needs a daemon that can cap a container's writable layer "
                "(overlay2 on xfs with pquota, devicemapper, btrfs or zfs); this one cannot. "
                "Use disk_mode 'tmpfs' (or 'auto').")
        return self.disk_mode


EVAL_LIMITS = Limits(cpus=None, memory=None, pids=4096, disk=None, shm=None, hardened=False)
DEV_TMPFS = 64 * 2**20  # Docker mounts /dev as a 64m tmpfs; no option changes it
MQUEUE_BYTES = 512 * 2**10  # RLIMIT_MSGQUEUE of episode containers (the kernel default, 800 KiB, is also the most runc may set)


@attrs.define(eq=False)
class Sandbox:
    """A started container plus the runner session that executes commands in it."""

    client: docker.DockerClient
    container: Any
    workdir: str
    session: RunnerSession | None = None
    file_limit: int | None = None
    no_runner: bool = False  # the image cannot run the runner: one exec per command
    disk_mode: str | None = None  # how `disk` is held (Limits.mode_for)
    volumes: list[str] = attrs.Factory(list)  # tmpfs workspace volumes, removed with the container
    keep_pids: str | None = None  # the fallback's sweep spares these: the container's own
    runner_keep: list[int] | None = None  # the runner's sweep spares these (from the first runner)

    @classmethod
    def start(cls, client: docker.DockerClient, image: str, *, workdir: str, limits: Limits,
              instance_id: str, purpose: str = "episode") -> Sandbox:
        name = f"envh-swebench-{purpose}-{uuid.uuid4().hex[:10]}"
        kwargs: dict[str, Any] = {
            "name": name, "detach": True, "init": True, "user": "root", "working_dir": workdir,
            "network_mode": "bridge" if limits.network else "none",
            "labels": {LABEL: purpose, OWNER_LABEL: owner_token(), INSTANCE_LABEL: instance_id}}
        if limits.cpus:
            kwargs["nano_cpus"] = int(limits.cpus * 1e9)
        if limits.memory:
            kwargs.update(mem_limit=limits.memory, memswap_limit=limits.memory)
        if limits.pids:
            kwargs["pids_limit"] = limits.pids
        if limits.shm:
            kwargs["shm_size"] = parse_size(limits.shm)
        if limits.hardened:
            from docker.types import Ulimit

            kwargs.update(security_opt=["no-new-privileges"], cap_drop=["ALL"],
                          cap_add=sorted(set(EPISODE_CAPS) | set(limits.cap_add)),
                          ulimits=[Ulimit(name="msgqueue", soft=MQUEUE_BYTES, hard=MQUEUE_BYTES)])
        elif limits.cap_add:
            kwargs["cap_add"] = list(limits.cap_add)
        mode = limits.mode_for(client)
        if mode == "storage-opt":
            kwargs["storage_opt"] = {"size": str(limits.disk_bytes)}
        volumes: list[str] = []
        try:
            client.images.get(image)  # never pull: no registry is assumed reachable
            if mode == "tmpfs":
                kwargs.update(_tmpfs_workspace(client, image, workdir, limits, kwargs["labels"], volumes))
            try:
                container = client.containers.create(image, ["sleep", "infinity"], **kwargs)
            except docker.errors.APIError as exc:
                if "storage_opt" not in kwargs or "storage" not in str(exc).lower():
                    raise
                _STORAGE_OPT[id(client)] = False  # e.g. xfs without pquota: the daemon said no
                if limits.disk_mode != "auto":
                    raise errors.InfraError(f"The daemon refused to cap the writable layer ({exc}); "
                                            "use disk_mode 'tmpfs' (or 'auto').") from exc
                container = None  # auto: the tmpfs workspace instead, below
        except docker.errors.ImageNotFound as exc:
            _remove_volumes(client, volumes)
            raise errors.InfraError(
                f"Image {image!r} for instance {instance_id!r} is not present locally; build it "
                f"(SWE-bench's image builder, or the instance's Dockerfile) or set the "
                f"instance's 'image' field.") from exc
        except docker.errors.DockerException as exc:
            _remove_volumes(client, volumes)
            raise errors.InfraError(f"Could not create a container from {image!r}: {exc}") from exc
        except BaseException:
            _remove_volumes(client, volumes)
            raise
        if container is None:
            return cls.start(client, image, workdir=workdir, limits=limits, instance_id=instance_id, purpose=purpose)
        box = cls(client=client, container=container, workdir=workdir, disk_mode=mode, volumes=volumes,
                  file_limit=limits.disk_bytes)  # also with a tmpfs: a sparse file takes no room there
        try:
            container.start()
            if mode == "tmpfs":  # a tmpfs volume lives while a container has it mounted: fill it now
                from . import workspace

                workspace.fill(client, image, workdir, volumes[0], {**kwargs["labels"], LABEL: "helper"})
        except docker.errors.DockerException as exc:
            box.close()
            raise errors.InfraError(f"Could not start a container from {image!r}: {exc}") from exc
        except BaseException:
            box.close()
            raise
        return box

    # -- commands ---------------------------------------------------------------------
    def run(self, command: str, *, timeout: float, limit: int, env: dict[str, str] | None = None,
            cwd: str | None = None, post: str | None = None, fsize: int | None = None,
            witness: bool = False) -> dict[str, Any]:
        """Run ``bash -c command``; returns exit_code, output, timed_out, dropped, and
        post_output: the output of ``post`` run right after (None if it failed).
        ``fsize``: the largest file the command may write, if tighter than ``file_limit``.
        ``witness``: the command runs the test-run witness; ``witness`` in the reply is its
        report (None without one, and always None without the runner: no python3)."""
        request = {"cmd": command, "cwd": cwd or self.workdir, "timeout": timeout, "limit": limit,
                   "env": env or {}, "post": post, "fsize": fsize or self.file_limit, "witness": witness}
        try:
            if self.session is None and not self.no_runner:
                self.session = RunnerSession.open(self.client, self.container.id, keep=self.runner_keep)
                self.no_runner = self.session is None
                if self.session is not None and self.runner_keep is None:
                    self.runner_keep = self.session.keep
            if self.session is not None:
                return self.session.request(request, timeout=timeout + 30)
            return self._exec_fallback(request)
        except EOFError as exc:  # the runner died: did the command kill it, in a live container?
            self._drop_session()
            if self.runner_keep is not None and self.status().get("Status") == "running":
                try:  # now: the new runner's first act is to sweep what the command left
                    self.session = RunnerSession.open(self.client, self.container.id, keep=self.runner_keep)
                except (OSError, EOFError, docker.errors.DockerException) as again:
                    raise self.infra_error(f"the runner could not be started again: {again!r}") from exc
                return {"exit_code": 137, "output": "[the command killed the environment's command runner; "
                        "it was started again]\n", "timed_out": False, "dropped": 0, "post_output": None,
                        "witness": None, "runner_killed": True}
            raise self.infra_error(f"command failed to run: {exc!r}") from exc
        except (OSError, docker.errors.DockerException) as exc:
            self._drop_session()
            raise self.infra_error(f"command failed to run: {exc!r}") from exc

    def _drop_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def _exec_fallback(self, req: dict[str, Any]) -> dict[str, Any]:
        """No usable Python in the image: one runtime exec per command; ``timeout -s KILL``
        ends it, ``ulimit -f`` bounds files, output is streamed and cut to head and tail.
        After it, as the runner does, every process it left behind is killed (the sweep
        runs in the exec that runs ``post``, so it costs no extra exec)."""
        if self.keep_pids is None:
            found = self.container.exec_run(["sh", "-c", _SH_PIDS])
            if found.exit_code != 0:
                raise OSError(f"cannot list the container's processes: {found.output[-300:]!r}")
            self.keep_pids = (found.output or b"").decode().strip()
        cmd = req["cmd"]
        if req.get("fsize"):  # ulimit -f counts 1024-byte blocks
            cmd = f"trap '' XFSZ; ulimit -f {max(1, req['fsize'] // 1024)}; {cmd}"
        argv = ["timeout", "-s", "KILL", str(max(1, int(req["timeout"]))), "bash", "-c", cmd]
        api = self.client.api
        exec_id = api.exec_create(self.container.id, argv, workdir=req["cwd"],
                                  environment=req["env"] or None)["Id"]
        limit = max(int(req["limit"]), 64)
        keep_tail = limit // 2
        head, tail, dropped = bytearray(), bytearray(), 0
        handle = api.exec_start(exec_id, socket=True)
        stream = RunnerSession(sock=getattr(handle, "_sock", handle), handle=handle)
        stream.sock.settimeout(float(req["timeout"]) + 30)
        try:
            for chunk in stream.frames():
                room = limit - keep_tail - len(head)
                if room > 0:
                    head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    tail += chunk
                    if len(tail) > keep_tail:
                        dropped += len(tail) - keep_tail
                        del tail[:len(tail) - keep_tail]
        finally:
            stream.close()
        code = api.exec_inspect(exec_id).get("ExitCode")
        out = head.decode("utf-8", "replace")
        if dropped:
            out += f"\n[... {dropped} bytes of output truncated ...]\n"
        out += tail.decode("utf-8", "replace")
        reply = {"exit_code": code, "output": out, "timed_out": code == 137,
                 "dropped": dropped, "post_output": None}
        # sweep, then post: `exec` keeps post's exit status; nothing is left to race it
        after = self.container.exec_run(
            ["sh", "-c", "{ " + _SH_SWEEP + '; } 2>/dev/null' + ('; exec bash -c "$0"' if req.get("post") else ""),
             req.get("post") or ""],
            workdir=req["cwd"], environment={"KEEP": self.keep_pids})
        if req.get("post") and after.exit_code == 0:
            reply["post_output"] = (after.output or b"").decode("utf-8", "replace")
        return reply

    def capture(self, argv: list[str], *, timeout: float, max_bytes: int) -> dict[str, Any]:
        """Run ``argv`` as one exec and collect its stdout and stderr on the host, from the
        exec's stream, as swebench's ``exec_run_with_timeout`` does: the process writes to
        pipes the daemon reads, which nothing in the container can seek, truncate or
        rewrite (a file in the container can be, by root code under test). Returns
        ``output`` (bytes), ``exit_code`` (None when reading stopped early), ``timed_out``
        (no end after ``timeout`` seconds) and ``too_large`` (more than ``max_bytes``
        came; reading stopped there). The exec is left running: the caller removes the
        container."""
        api = self.client.api
        try:
            exec_id = api.exec_create(self.container.id, argv, workdir=self.workdir)["Id"]
            handle = api.exec_start(exec_id, socket=True)
        except (OSError, docker.errors.DockerException) as exc:
            raise self.infra_error(f"command failed to start: {exc!r}") from exc
        stream = RunnerSession(sock=getattr(handle, "_sock", handle), handle=handle)
        deadline = time.monotonic() + timeout
        out, timed_out, too_large = bytearray(), False, False
        try:
            stream.sock.settimeout(max(timeout, 0.001))
            for chunk in stream.frames():
                out += chunk
                left = deadline - time.monotonic()
                too_large, timed_out = len(out) > max_bytes, left <= 0
                if too_large or timed_out:
                    break
                stream.sock.settimeout(left)
        except TimeoutError:
            timed_out = True
        except EOFError:  # the stream ended inside a frame: the container went away
            pass
        except OSError as exc:
            raise self.infra_error(f"reading the command's output failed: {exc!r}") from exc
        finally:
            stream.close()
        code = None
        if not (timed_out or too_large):
            try:
                code = api.exec_inspect(exec_id).get("ExitCode")
            except docker.errors.DockerException as exc:
                raise self.infra_error(f"the command's exit status is unknown: {exc!r}") from exc
        return {"output": bytes(out), "exit_code": code, "timed_out": timed_out, "too_large": too_large}

    # -- files (archives, no exec) ----------------------------------------------------
    def read_file(self, path: str, *, max_bytes: int | None = None) -> tuple[bytes, int]:
        """Contents and permission bits of a regular file; FileNotFoundError or
        IsADirectoryError otherwise; FileTooLargeError beyond ``max_bytes``."""
        try:
            stream, stat = self.container.get_archive(path)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(path) from exc
        except docker.errors.APIError as exc:
            if _path_problem(exc):  # a path through a regular file, or too long
                raise FileNotFoundError(path) from exc
            raise self.infra_error(f"reading {path[:300]} failed: {str(exc)[:500]}") from exc
        except docker.errors.DockerException as exc:
            raise self.infra_error(f"reading {path} failed: {exc}") from exc
        if stat.get("mode", 0) & (1 << 31):  # os.ModeDir in Go's FileMode
            raise IsADirectoryError(path)
        if max_bytes is not None and stat.get("size", 0) > max_bytes:
            close = getattr(stream, "close", None)
            if close:
                close()
            raise FileTooLargeError(path, int(stat.get("size", 0)), max_bytes)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            if member is None or member.isdir():
                raise IsADirectoryError(path)
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is None:  # a FIFO, device or link
                raise NotRegularFileError(path)
            return handle.read(), stat.get("mode", 0o644) & 0o7777

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Create or replace ``path`` (absolute); its directory must exist."""
        directory, _, base = path.rstrip("/").rpartition("/")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(base)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        try:
            ok = self.container.put_archive(directory or "/", buf.getvalue())
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(directory) from exc
        except docker.errors.APIError as exc:
            if _path_problem(exc):
                raise FileNotFoundError(directory) from exc
            if "no space left on device" in str(exc).lower():  # the policy's disk bound, not the host's
                raise NoSpaceError(path) from exc
            raise self.infra_error(f"writing {path[:300]} failed: {str(exc)[:500]}") from exc
        except docker.errors.DockerException as exc:
            raise self.infra_error(f"writing {path} failed: {exc}") from exc
        if not ok:
            raise self.infra_error(f"writing {path} failed")

    # -- lifecycle --------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return {"Status": "removed"}
        return dict(self.container.attrs.get("State", {}))

    def infra_error(self, what: str) -> errors.InfraError:
        state = self.status()
        return errors.InfraError(
            f"Container {self.container.name} ({state.get('Status', '?')}, exit code "
            f"{state.get('ExitCode', '?')}, OOMKilled={state.get('OOMKilled', '?')}): {what}")

    def disk_used(self) -> int | None:
        """Bytes in the container's writable layer (docker's SizeRw), None if unknown."""
        try:
            rows = self.client.api.containers(all=True, size=True, filters={"id": self.container.id})
        except docker.errors.DockerException:
            return None
        return int(rows[0].get("SizeRw") or 0) if rows else None

    def commit(self, repository: str = "envh-swebench-snapshot", *, max_bytes: int | None = None) -> str:
        """Snapshot the container's filesystem as an image; returns the image id. With a
        tmpfs workspace the image holds the repository as it is now (scratch places are
        not kept: they start empty, as in any new episode). ``max_bytes``: refuse
        (SnapshotTooLargeError) when what would be written to the host's disk is larger,
        counting files at their apparent size (a sparse file is written out whole)."""
        conf = {"Labels": {LABEL: "snapshot", OWNER_LABEL: owner_token()}}
        if max_bytes is not None:
            if self.disk_mode == "tmpfs":
                res = self.run(f"du -s --apparent-size -B1 {self.workdir} | cut -f1", timeout=120, limit=200)
                size = int(res["output"].strip()) if res["exit_code"] == 0 and res["output"].strip().isdigit() else None
            else:
                size = self.disk_used()
            if size is None or size > max_bytes:
                raise SnapshotTooLargeError(size, max_bytes)
        if self.disk_mode == "tmpfs":
            from . import workspace

            return workspace.commit(self.client, self.container.image.id, self.workdir, self.volumes[0],
                                    {LABEL: "helper", OWNER_LABEL: owner_token()},
                                    repository, uuid.uuid4().hex[:12], conf)
        try:
            image = self.container.commit(repository=repository, tag=uuid.uuid4().hex[:12], conf=conf)
        except docker.errors.DockerException as exc:
            raise self.infra_error(f"docker commit failed: {exc}") from exc
        return str(image.id)

    def close(self) -> None:
        """Stop the runner and remove the container; safe to call twice."""
        if self.session is not None:
            self.session.close()
            self.session = None
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise errors.InfraError(f"Could not remove container {self.container.name}: {exc}") from exc
        volumes, self.volumes = self.volumes, []
        _remove_volumes(self.client, volumes)


def _remove_volumes(client: docker.DockerClient, names: list[str]) -> None:
    from . import workspace

    for name in names:
        workspace.remove_volume(client, name)


def _tmpfs_workspace(client: docker.DockerClient, image: str, workdir: str, limits: Limits,
                     labels: dict[str, str], volumes: list[str]) -> dict[str, Any]:
    """Create the workspace volumes (appended to ``volumes`` as they are made, for the
    caller to remove on failure); returns the container's extra settings. The repository
    is copied in once the container runs (``workspace.fill``)."""
    from docker.types import Mount

    from . import workspace

    disk, scratch = limits.disk_bytes or 0, parse_size(limits.scratch) or 0
    volumes.append(workspace.create_volume(client, disk, labels, mode="0755"))
    volumes.append(workspace.create_volume(client, scratch, labels, mode="1777"))
    extra: dict[str, Any] = {
        "read_only": True,
        "mounts": [Mount(target=workdir, source=volumes[0], type="volume"),
                   Mount(target="/tmp", source=volumes[1], type="volume")],
        "tmpfs": {path: f"size={scratch},nr_inodes={workspace.inodes(scratch)},"
                        f"mode={'0700' if path == '/root' else '1777'},exec"
                  for path in workspace.SCRATCH_TMPFS}}
    memory = parse_size(limits.memory)
    if memory:  # tmpfs pages count as the container's memory: the processes keep theirs
        shm = parse_size(limits.shm) or 64 * 2**20
        total = memory + disk + scratch * (1 + len(workspace.SCRATCH_TMPFS)) + shm + DEV_TMPFS
        extra.update(mem_limit=total, memswap_limit=total)
    return extra
