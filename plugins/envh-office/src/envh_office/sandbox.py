"""The per-episode workbook sandbox: one labelled, limited Docker container per episode.

The container has no network, a read-only root, tmpfs ``/work`` and ``/tmp`` (size
capped, counted against its memory limit), CPU, memory and pid limits. ``run_python``
sends the workbook and the code to a long-lived runner (``_pyrunner``) over one attached
exec and gets the workbook back; nothing of the host is mounted. Containers carry the
label ``envh.office`` and an owner token (host, pid, pid start time): a later process
removes those whose owner is gone, and an ``atexit`` hook removes this process's own.
Docker failures are ``envh.errors.InfraError``.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import socket
import struct
import threading
import time
import uuid
from importlib import resources
from typing import Any

import attrs
from envh import errors

IMAGE = os.environ.get("ENVH_OFFICE_IMAGE", "envh-office/sandbox:bookworm")
LABEL = "envh.office"
OWNER_LABEL = "envh.office.owner"
BUILD_HINT = "build it with `bash plugins/envh-office/images/build.sh` (dev/setup.d/office.sh does)"

_clients: dict[tuple[int, str | None], Any] = {}
_open: set[Sandbox] = set()
_lock = threading.Lock()


def _start_time(pid: int) -> str:
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


def client(base_url: str | None = None) -> Any:
    """The shared Docker client (per pid); the first one removes orphaned sandboxes."""
    import docker

    key = (os.getpid(), base_url)
    with _lock:
        if key in _clients:
            return _clients[key]
        url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        if url.startswith("unix://"):
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.settimeout(5)
                    probe.connect(url[len("unix://"):])
            except OSError as exc:
                raise errors.InfraError(f"Cannot reach the Docker daemon at {url}: {exc}. Start dockerd "
                                        "(dev/setup.d/docker.sh does).") from exc
        try:
            c = docker.DockerClient(base_url=url, timeout=120)
            c.ping()
        except docker.errors.DockerException as exc:
            raise errors.InfraError(f"Cannot reach the Docker daemon at {url}: {exc}") from exc
        cleanup_orphans(c)
        _clients[key] = c
        return c


def cleanup_orphans(c: Any) -> list[str]:
    """Remove envh-office containers whose owning process on this host is gone. A container
    another run removes meanwhile is skipped (two runs on one host each clean up at start-up)."""
    import docker

    removed = []
    for box in c.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        if _owner_alive(box.labels.get(OWNER_LABEL, "")):
            continue
        try:
            box.remove(force=True)
            removed.append(box.name)
        except docker.errors.NotFound:
            pass
    return removed


class SandboxGone(errors.InfraError):
    """The container stopped while code ran in it: the code killed its processes or ran
    it out of memory. The bridge answers the policy and starts a fresh container."""


@attrs.frozen(kw_only=True)
class Limits:
    cpus: float = 1.0
    memory: str = "1g"
    pids: int = 128
    work_mb: int = 128


@attrs.define(eq=False)
class Sandbox:
    """A started container and the runner session inside it."""

    client: Any
    container: Any
    limits: Limits
    sock: Any = None
    handle: Any = None
    _buf: bytearray = attrs.Factory(bytearray)
    _err: bytearray = attrs.Factory(bytearray)

    @classmethod
    def start(cls, c: Any, image: str = IMAGE, limits: Limits = Limits()) -> Sandbox:
        import docker

        try:
            c.images.get(image)  # never pull: no registry is assumed reachable
        except docker.errors.ImageNotFound as exc:
            raise errors.InfraError(f"Sandbox image {image!r} is not built; {BUILD_HINT}.") from exc
        name = f"envh-office-{uuid.uuid4().hex[:12]}"
        tmpfs = f"rw,size={limits.work_mb}m,mode=1777,uid=65534,gid=65534"  # the code runs as nobody
        try:
            container = c.containers.run(
                image, ["sleep", "infinity"], name=name, detach=True, init=True, network_mode="none",
                read_only=True, tmpfs={"/work": tmpfs, "/tmp": tmpfs}, working_dir="/work",
                nano_cpus=int(limits.cpus * 1e9), mem_limit=limits.memory, memswap_limit=limits.memory,
                pids_limit=limits.pids, labels={LABEL: "episode", OWNER_LABEL: owner_token()},
                # the code is untrusted: not root, no capabilities, no setuid way back to them
                user="65534:65534", cap_drop=["ALL"], security_opt=["no-new-privileges"])
        except docker.errors.DockerException as exc:
            raise errors.InfraError(f"Could not start a sandbox from {image!r}: {exc}") from exc
        box = cls(client=c, container=container, limits=limits)
        with _lock:
            _open.add(box)
        return box

    # -- runner session -----------------------------------------------------------------
    def _open_session(self) -> None:
        source = resources.files("envh_office").joinpath("_pyrunner.py").read_text()
        api = self.client.api
        exec_id = api.exec_create(self.container.id, ["python3", "-u", "-c", source], stdin=True,
                                  stdout=True, stderr=True, tty=False)["Id"]
        self.handle = api.exec_start(exec_id, socket=True)
        self.sock = getattr(self.handle, "_sock", self.handle)
        self.sock.settimeout(60)
        self._buf.clear()
        if not json.loads(self._line()).get("ready"):
            raise OSError("the runner did not start")

    def _read_exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError("runner closed: " + self._err.decode("utf-8", "replace")[-300:])
            data += chunk
        return bytes(data)

    def _line(self) -> bytes:
        while b"\n" not in self._buf:
            kind, size = struct.unpack(">BxxxL", self._read_exact(8))
            (self._err if kind == 2 else self._buf).extend(self._read_exact(size))
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf[:] = rest
        return line

    def _close_session(self) -> None:
        for closer in (lambda: self.sock.shutdown(socket.SHUT_WR), lambda: self.sock.close(),
                       lambda: self.handle.close()):
            try:
                closer()
            except (OSError, AttributeError):
                pass
        self.sock = self.handle = None

    def run_python(self, code: str, workbook: bytes, *, timeout: float, limit: int) -> dict[str, Any]:
        """Run ``code`` against ``workbook``; the reply has exit_code, output, timed_out,
        dropped, workbook (bytes or None) and workbook_problem. A runner that died (the
        code killed it, or ran it out of memory) is restarted once per call."""
        import docker

        nonce = uuid.uuid4().hex  # a reply without it did not come from the runner for this call
        req = json.dumps({"code": code, "workbook": base64.b64encode(workbook).decode(), "timeout": timeout,
                          "limit": limit, "memory": _bytes(self.limits.memory) * 3 // 4,
                          "nonce": nonce}).encode() + b"\n"
        for attempt in (0, 1):
            try:
                if self.sock is None:
                    self._open_session()
                self.sock.settimeout(timeout + 30)
                self.sock.sendall(req)
                for _ in range(1000):  # lines that are not this call's reply are dropped
                    line = self._line()
                    try:
                        reply = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(reply, dict) and reply.get("nonce") == nonce:
                        break
                else:
                    raise ValueError("no reply from the runner for this call")
                break
            except (OSError, EOFError, ValueError, docker.errors.DockerException) as exc:
                self._close_session()
                if not self._still_alive():
                    gone = self.infra_error(f"the container stopped while code ran: {exc!r}")
                    raise SandboxGone(str(gone)) from exc
                if attempt:
                    return {"exit_code": -9, "output": "", "timed_out": False, "dropped": 0, "workbook": None,
                            "workbook_problem": "the sandbox runner died while running the code (it was "
                                                f"killed or ran out of memory: {type(exc).__name__}); the "
                                                "workbook is unchanged", "runner_died": True}
        if "runner_error" in reply:
            raise self.infra_error(f"sandbox runner error: {reply['runner_error']}")
        book = reply.get("workbook")
        reply["workbook"] = base64.b64decode(book) if book is not None else None
        return reply

    # -- lifecycle ----------------------------------------------------------------------
    def _still_alive(self, settle: float = 1.5) -> bool:
        """After a failed call: is the container up? A stopping container can still report
        running for a moment, so watch it briefly before answering yes."""
        deadline = time.monotonic() + settle
        while self.alive():
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.1)
        return False

    def alive(self) -> bool:
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - gone, or the daemon is: not alive either way
            return False
        return bool(self.container.attrs.get("State", {}).get("Running"))

    def infra_error(self, what: str) -> errors.InfraError:
        try:
            self.container.reload()
            state = self.container.attrs.get("State", {})
        except Exception:  # noqa: BLE001
            state = {"Status": "removed"}
        return errors.InfraError(f"Sandbox {self.container.name} ({state.get('Status', '?')}, "
                                 f"OOMKilled={state.get('OOMKilled', '?')}): {what}")

    def close(self) -> None:
        """Stop the runner and remove the container; safe to call twice."""
        import docker

        self._close_session()
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise errors.InfraError(f"Could not remove sandbox {self.container.name}: {exc}") from exc
        finally:
            with _lock:
                _open.discard(self)


def _bytes(size: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = size.strip().lower()
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


@atexit.register
def _close_all() -> None:
    for box in list(_open):
        try:
            box.close()
        except Exception:  # noqa: BLE001 - best effort at exit; start-up cleanup is the backstop
            pass
