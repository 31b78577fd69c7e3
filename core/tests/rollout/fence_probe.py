"""A plugin module for the fence tests: a policy that tries to read, write and unmount
what a worker must not, and a Toy24 bridge that reads its game from a declared data
directory (``BridgeInfo.data_paths``), as ALFWorld reads its games."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import envh
from envh import Action
from envh.bridges.toy24 import Toy24Env
from envh.rollout.policy import PolicyStep


def _read(path: str) -> str:
    try:
        return Path(path).read_bytes().decode(errors="replace")[:20000]
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _write(path: str) -> str:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("written by a worker")
        return "written"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _open_for_writing(path: str) -> str:
    try:
        os.close(os.open(path, os.O_WRONLY))
        return "opened"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _connect(port: int) -> str:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return sock.recv(1024).decode(errors="replace").splitlines()[0]
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


def _run(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"status {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"


class Probe:
    """Reads ``reads``, writes ``writes``, and from inside a user namespace of its own (what
    the jail of untrusted code may make) tries to unmount the stand-ins over ``unmount``
    and read ``reads`` again."""

    policy_id = "test-fence-probe"

    def __init__(self, arg=None, parent_pid=0, reads=(), writes=(), unmount=(), opens=(), connect=(), **options):
        self.connect = [int(p) for p in connect]  # loopback ports of the parent's machine
        self.parent_pid, self.reads, self.writes, self.unmount = int(parent_pid), list(reads), list(writes), \
            list(unmount)
        self.opens = list(opens)  # opened for writing and closed unwritten: the kernel's knobs, raw disks

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        escape = " ; ".join([*(f"umount -l {p} 2>&1" for p in self.unmount),
                             *(f"cat {p} 2>&1" for p in self.reads)])
        return PolicyStep(action=Action(tool="stop"), raw={
            "uid": os.getuid(), "home": os.environ.get("HOME"), "cwd": os.getcwd(),
            "parent_environ": _read(f"/proc/{self.parent_pid}/environ"),
            "reads": {p: _read(p) for p in self.reads},
            "writes": {p: _write(p) for p in self.writes},
            "opens": {p: _open_for_writing(p) for p in self.opens},
            "connect": {str(p): _connect(p) for p in self.connect},
            "mountinfo": _read("/proc/self/mountinfo"),
            "escape": _run(["unshare", "--user", "--map-root-user", "--mount", "--", "sh", "-c", escape])
            if escape else ""})

    def close(self):
        pass


class DataToy24(Toy24Env):
    """Toy24 whose generator seed comes from ``<data_dir>/seed`` (or ``$FENCE_DATA/seed``):
    the env cannot be built unless the worker reads its declared data."""

    def __init__(self, data_dir: str | None = None, **kw):
        root = data_dir or os.environ.get("FENCE_DATA")
        if not root:
            raise envh.errors.EnvError("fence-data: no data_dir and no FENCE_DATA")
        seed = int(Path(root, "seed").read_text().strip())
        super().__init__(generator_seed=seed, **kw)


@envh.hookimpl
def envh_bridges():
    return [envh.BridgeInfo(name="fence-data", factory=DataToy24, data_paths=("{data_dir}", "FENCE_DATA="))]


@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="fenceprobe", factory=Probe),
            envh.PolicyInfo(name="fenceprobe-net", factory=Probe, host_access=("network",))]
