"""How a worker process is fenced off from its parent (DESIGN invariant 3: workers never
see the parent's secrets, even as root).

Levels (``isolation=``):

* ``none``: a plain child process (its environment is still scrubbed).
* ``user`` (what ``auto`` is for a root parent, and ``envh run``'s default): the uid and
  gid of ``nobody``, no capabilities, ``no_new_privs``, own PID namespace with a fresh
  ``/proc`` (the parent is not there), and own mount namespace where the parent's home,
  ``/root``, ``/home``, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are empty stand-ins (the
  temporary ones private and writable), everything else is read-only, and only these come
  back: the Python installation (read-only), the worker's own directory (writable), and
  the host paths its bridges and policies declare (``BridgeInfo.data_paths``,
  ``PolicyInfo.data_paths``, ``ComponentKind.data_paths``: read-only unless declared
  ``rw:``; a ``rw:`` file that does not exist yet gives its directory). Declared paths are
  idmapped mounts that show root's files as nobody's, so data only root could open (a
  0700 directory, a 0600 file) is readable there and nowhere else — except what an
  untrusted spec's config names (read-only, as on the host), and writable directories
  other users can reach (plain binds: nobody's files there would land as root's, setuid
  bits included). Sockets, devices and pipes are never given. A declared path that
  would undo the fence (``/``, a home, a hidden root or a directory holding one, /etc,
  /proc, a dot-directory of a home but ``~/.cache/...``) is refused (``check_data_path``).
* ``namespace``: the same fence with uid 0 kept (capabilities dropped but CAP_SETFCAP,
  which the jail of untrusted code needs): for data whose file system has no idmapped
  mounts. Root-only files it can still open by ownership outside the hidden places are
  its weakness; /etc's shadow files, sudoers and ssh keys are masked, /proc/sys and the
  kernel's other knobs in /proc are read-only.

Workers get a network namespace of their own (its loopback up, nothing else) unless a
bridge or policy of the run declares ``host_access=("network",)`` (an endpoint to call:
``openai``, ``grpo-remote``, webarena's sites): a root service on the host's loopback (a
browser's DevTools port, a TCP proxy to the Docker socket) is otherwise one connect away.
Fenced workers are not dumpable (their /proc entries are closed to other ``nobody``s).

The Docker daemon (its sockets, and containerd's, are root on the host) is out of reach
unless the bridges the pool plays declare ``host_access=("docker",)``: its sockets are
covered by ``/dev/null`` and its runtime directories by an empty tmpfs; a ``user``
worker of such a bridge gets the socket's group. A daemon reachable over TCP
(``DOCKER_HOST=tcp://...``, ``hosts`` in /etc/docker/daemon.json, or a running daemon
listening on a TCP port) cannot be hidden from workers that share the parent's network:
the pool refuses to start bridges that do not declare Docker while one is
(``docker_tcp_endpoints``).

``auto`` is ``user`` for a root parent with ``unshare``/``setpriv`` (util-linux)
available, else ``none``. Both need root (a non-root parent has no secrets beyond its own
user's to protect from a same-user child, and cannot make namespaces without user
namespaces).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ... import errors

LEVELS = ("auto", "none", "namespace", "user")
NOBODY = 65534


def resolve(level: str | None) -> str:
    """The effective level of ``level`` here."""
    level = level or "none"
    if level not in LEVELS:
        raise errors.EnvhError(f"Unknown isolation {level!r}. Choose one of: {', '.join(LEVELS)}")
    if level == "none":
        return level
    possible = _namespaces_work()
    if level == "auto":
        return "user" if possible else "none"
    if not possible:
        raise errors.EnvhError(f"Worker isolation {level!r} needs root, util-linux's unshare and setpriv, and "
                               "a kernel that allows new namespaces here; run as root or choose --isolation none.")
    return level


@functools.cache
def _namespaces_work() -> bool:
    """Root, util-linux's tools, and a kernel (or container) that lets us make namespaces."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")):
        return False
    try:
        probe = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--", "setpriv",
                                "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--", "true"],
                               capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def _needed() -> set[Path]:
    """What a worker must reach: the interpreter, stdlib, venv and sys.path entries."""
    wanted = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).resolve().parent.parent,
              *(Path(p) for p in sys.path if p),
              *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p))}
    out = set()
    for path in wanted:
        try:
            real = path.resolve()
        except OSError:
            continue
        if real.is_dir():
            out.add(real)
    return out


def _hidden_roots() -> dict[str, list[str]]:
    """Directories a fenced worker gets an empty stand-in for, each with the needed
    directories under it to bind back read-only: ``HIDDEN`` and the parent's home always, and any other
    directory on the way to the Python installation or envh's code that others cannot
    traverse (a checkout in a private 0700 directory)."""
    import stat

    home = Path(os.path.expanduser("~")).resolve()
    needed = _needed()
    roots: set[Path] = {home} if str(home) != "/" else set()
    for name in HIDDEN:  # the real directories only (a symlinked /var/tmp is hidden where it points)
        if os.path.isdir(name):
            roots.add(Path(name).resolve())
    roots.discard(Path("/"))
    for path in needed:
        for part in [*reversed(path.parents), path][1:]:  # below "/"
            try:
                closed = not part.stat().st_mode & stat.S_IXOTH
            except OSError:
                break
            if closed:
                roots.add(part)
                break
    out: dict[str, list[str]] = {}
    for root in sorted(roots, key=lambda r: len(r.parts)):
        if any(other in root.parents for other in roots):
            continue  # inside another stand-in: its binds come from there
        binds = {str(p) for p in needed if root in p.parents}
        # a directory already inside another bound one needs no bind of its own
        out[str(root)] = sorted(p for p in binds if not any(p != q and p.startswith(q + os.sep) for q in binds))
    return out


def _home_binds() -> list[str]:
    """Directories under the parent's home that Python needs, to bind back over the emptied home."""
    home = str(Path(os.path.expanduser("~")).resolve())
    return _hidden_roots().get(home, [])


DOCKER_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock")
DOCKER_DIRS = ("/run/docker", "/run/containerd", "/var/run/docker", "/var/run/containerd")


def _docker_paths() -> tuple[list[str], list[str]]:
    """The Docker daemon's sockets (``DOCKER_HOST``'s unix socket too) and runtime
    directories that exist here, resolved and without repeats."""
    sockets = list(DOCKER_SOCKETS)
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        sockets.append(host[len("unix://"):])
    seen: set[str] = set()
    found_sockets, found_dirs = [], []
    for path in sockets:
        real = os.path.realpath(path)
        if real not in seen and os.path.exists(real) and not os.path.isdir(real):
            seen.add(real)
            found_sockets.append(real)
    for path in DOCKER_DIRS:
        real = os.path.realpath(path)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            found_dirs.append(real)
    return found_sockets, found_dirs


DAEMON_JSON = "/etc/docker/daemon.json"
#: Daemons that are root on the host when reached (``comm`` names).
DAEMONS = ("dockerd", "containerd", "podman", "buildkitd")


def docker_tcp_endpoints(environ: dict[str, str] | None = None, daemon_json: str = DAEMON_JSON) -> list[str]:
    """How a container daemon is reachable over TCP here, in words (empty when it is not):
    ``DOCKER_HOST=tcp://...`` in ``environ``, ``tcp://`` hosts in ``daemon_json``, and a
    running daemon (``DAEMONS``) holding a listening TCP socket. Workers share the parent's
    network, so no mount hides such a daemon from them: it is root on the host to anyone
    who connects."""
    environ = dict(os.environ) if environ is None else environ
    found = []
    host = environ.get("DOCKER_HOST", "")
    if host and not host.startswith(("unix://", "npipe://")):
        found.append(f"DOCKER_HOST={host}")
    try:
        with open(daemon_json, encoding="utf-8") as fh:
            hosts = json.load(fh).get("hosts", [])
    except (OSError, ValueError, AttributeError):
        hosts = []
    found += [f"{daemon_json} hosts {h}" for h in hosts if isinstance(h, str) and not h.startswith(("unix://", "fd://"))]
    found += [f"{name} (pid {pid}) listens on {address}" for name, pid, address in _listening_daemons()]
    return found


def _listening_daemons(names: tuple[str, ...] = DAEMONS) -> list[tuple[str, int, str]]:
    """(name, pid, address) of each process named in ``names`` (``DAEMONS``) with a listening TCP socket."""
    listening: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":  # LISTEN
                address, port = fields[1].rsplit(":", 1)
                listening[fields[9]] = f"{'::' if len(address) > 8 else _ipv4(address)}:{int(port, 16)}"
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            name = Path(f"/proc/{entry}/comm").read_text().strip()
            if name not in names:
                continue
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue
            inode = target[len("socket:["):-1] if target.startswith("socket:[") else None
            if inode in listening:
                out.append((name, int(entry), listening[inode]))
    return out


def _ipv4(hex_address: str) -> str:
    return ".".join(str(b) for b in reversed(bytes.fromhex(hex_address)))


def _docker_group() -> int | None:
    for path in _docker_paths()[0]:
        try:
            return os.stat(path).st_gid
        except OSError:
            continue
    return None


# The fence's mounts, made by a short Python program run as root inside the worker's new
# mount namespace before it gives up its privileges (``python -I -S``: stdlib only). Trees
# it binds back are cloned first (``open_tree``), so nothing needs a staging directory;
# then every mount is made read-only, the stand-ins are mounted, and the clones moved in.
# ``idmap`` clones show root-owned files as owned by ``nobody`` (an idmapped mount), so a
# ``user`` worker reads a bridge's data that only root could open, without a chmod on the host.
SETUP = r"""
import ctypes, json, os, sys
plan = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
OPEN_TREE, MOVE_MOUNT, MOUNT_SETATTR = 428, 429, 442
CLONE, CLOEXEC, RECURSIVE, EMPTY, NOFOLLOW = 1, 0o2000000, 0x8000, 0x1000, 0x100
RDONLY, IDMAP, NOSUID, NODEV = 0x1, 0x100000, 0x2, 0x4
MS_RDONLY, MS_BIND, MS_REMOUNT, MS_REC = 1, 4096, 32, 16384
class Attr(ctypes.Structure):
    _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64), ("prop", ctypes.c_uint64), ("ns", ctypes.c_uint64)]
def check(rc, what):
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc
def setattr_(fd, path, flags, set_=0, clr=0, ns=0):
    a = Attr(set_, clr, 0, ns)
    return libc.syscall(MOUNT_SETATTR, fd, path.encode(), flags, ctypes.byref(a), ctypes.sizeof(a))
def nobody_ns():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        if libc.unshare(0x10000000) != 0:
            os._exit(1)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    import time
    own = os.readlink("/proc/self/ns/user")
    for _ in range(2000):
        if os.readlink(f"/proc/{pid}/ns/user") != own:
            break
        time.sleep(0.001)
    for name, text in (("uid_map", "0 65534 1"), ("setgroups", "deny"), ("gid_map", "0 65534 1")):
        with open(f"/proc/{pid}/{name}", "w") as fh:
            fh.write(text)
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    os.close(w)
    os.waitpid(pid, 0)
    return fd
ns = None
clones = []
for src, dst, writable, idmap, recursive in plan["binds"]:
    fd = check(libc.syscall(OPEN_TREE, -100, src.encode(), CLONE | CLOEXEC | NOFOLLOW | (RECURSIVE if recursive else 0)),
               f"clone {src}")
    flags = (RECURSIVE if recursive else 0) | EMPTY
    check(setattr_(fd, "", flags, 0 if writable else RDONLY, RDONLY if writable else 0), f"mode of {src}")
    if idmap:
        if ns is None:
            ns = nobody_ns()
        if setattr_(fd, "", EMPTY, IDMAP, 0, ns) < 0:
            sys.stderr.write(f"envh: {src} cannot be shown to nobody as its own (no idmapped mounts on its "
                             f"file system): the worker reads it only where others may\n")
    clones.append((fd, dst, os.path.isdir(src)))
devices = []
for name in plan.get("dev", ()):  # a uid-0 worker's /dev: these alone (root owns the disks)
    path = "/dev/" + name
    if os.path.exists(path):
        fd = check(libc.syscall(OPEN_TREE, -100, path.encode(), CLONE | CLOEXEC | NOFOLLOW | RECURSIVE),
                   f"clone {path}")
        devices.append((fd, path, os.path.isdir(path)))
check(setattr_(-100, "/", RECURSIVE, RDONLY), "make the tree read-only")
if plan.get("dev"):
    check(libc.mount(b"envh-dev", b"/dev", b"tmpfs", NOSUID, b"mode=0755,size=1m"), "hide /dev")
    for fd, path, is_dir in devices:
        os.mkdir(path) if is_dir else open(path, "a").close()
        check(libc.syscall(MOVE_MOUNT, fd, b"", -100, path.encode(), 4), f"bind {path}")
    os.mkdir("/dev/shm")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, "/dev/" + name)
    check(setattr_(-100, "/dev", 0, RDONLY), "seal /dev")
check(setattr_(-100, "/proc", RECURSIVE, 0, RDONLY), "keep /proc")
for path, mode in plan["hide"]:  # scratch places (1777) as large as the kernel's default: Chromium's /dev/shm
    size = "" if mode == "1777" else ",size=1m"
    check(libc.mount(b"envh-hidden", path.encode(), b"tmpfs", NOSUID | NODEV, f"mode={mode}{size}".encode()),
          f"hide {path}")
for path in plan["masks"]:
    if os.path.isdir(path):
        check(libc.mount(b"envh-hidden", path.encode(), b"tmpfs", 0, b"mode=0755,size=1m"), f"mask {path}")
    elif os.path.lexists(path):
        check(libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None), f"mask {path}")
for fd, dst, is_dir in sorted(clones, key=lambda c: c[1].count("/")):
    if is_dir:
        os.makedirs(dst, exist_ok=True)
    elif not os.path.lexists(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    check(libc.syscall(MOVE_MOUNT, fd, b"", -100, dst.encode(), 4), f"bind {dst}")
for path in plan["sealed"]:
    check(setattr_(-100, path, 0, RDONLY), f"seal {path}")
for path in plan.get("proc_sealed", ()):
    if os.path.exists(path):
        check(libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None), f"bind {path}")
        check(libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None), f"seal {path}")
if plan.get("loopback"):  # a network of its own: its loopback up, nothing else
    import fcntl, socket, struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
if plan.get("cwd"):
    os.chdir(plan["cwd"])
if len(sys.argv) > 2:  # then become the command (a Ray actor keeps its pid: Ray watches it)
    os.execvp(sys.argv[2], sys.argv[2:])
"""

#: Directories a fenced worker gets an empty one instead of (besides the parent's home
#: and closed directories on the way to Python): other users' homes, and the machine's
#: shared temporary places, where other runs keep their stores and work directories.
HIDDEN = ("/root", "/home", "/tmp", "/var/tmp", "/dev/shm")
#: Temporary places keep a private, writable, empty stand-in (programs expect one).
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
#: Files only root may read that a uid-0 (``namespace``) worker would otherwise read by
#: ownership alone; a ``nobody`` worker is kept out of them by their modes.
ROOT_ONLY = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/ssh")
#: The kernel's knobs in /proc that root may write by ownership alone (``core_pattern``
#: would run a program as root on the host): read-only for uid-0 workers. ``nobody`` may
#: not write them anyway, and leaving /proc whole lets its jail mount a /proc of its own.
PROC_SEALED = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
#: A uid-0 worker's /dev holds these alone: root owns the disks, swap and loop devices.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts")
#: Never a data path: they would bring back what the fence hides, or the kernel's knobs.
SYSTEM = ("/proc", "/sys", "/dev", "/etc", "/run", "/var/run", "/boot")


def _roots() -> list[Path]:
    """The stand-in roots: ``HIDDEN``, the parent's home, and closed directories on the way
    to what Python needs."""
    return [Path(r) for r in _hidden_roots()]


def check_data_path(path: str, work_dir: str | None = None) -> str | None:
    """The real path a worker may be given for ``path`` (a bridge's or policy's declared
    data), ``None`` when there is nothing to give (relative: inside the worker's own
    directory; missing), or ``errors.EnvhError`` when giving it would undo the fence: ``/``,
    a home or a hidden root or any directory holding one, the system's trees, a dot-directory
    of a home (keys, credentials) other than something inside ``~/.cache``."""
    if not path or not os.path.isabs(path):
        return None
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return None
    where = f"the data path {path!r}" + (f" (really {real})" if real != os.path.normpath(path) else "")
    if not (os.path.isdir(real) or os.path.isfile(real)):  # a socket shown as nobody's own is one it may connect to
        raise errors.EnvhError(f"Refusing {where}: not a file or directory (a socket, device or pipe).")
    target = Path(real)
    homes = {Path(os.path.expanduser("~")).resolve(), Path("/root"), *(_existing_dirs("/home"))}
    for root in {*_roots(), *homes}:
        if target == root or root.is_relative_to(target):
            raise errors.EnvhError(f"Refusing {where}: it holds {root}, which workers are kept out of. "
                                   "Name the data directory itself.")
    for system in SYSTEM:
        if target == Path(system) or target.is_relative_to(system):
            raise errors.EnvhError(f"Refusing {where}: workers are not given {system}.")
    for home in homes:
        if target.is_relative_to(home):
            first = target.relative_to(home).parts[0]
            inside = target.relative_to(home).parts
            if first.startswith(".") and not (first == ".cache" and len(inside) > 1):
                raise errors.EnvhError(f"Refusing {where}: a hidden directory of {home} (keys and credentials "
                                       "live there); only paths inside ~/.cache may be declared there.")
    return real


def _reachable(path: str) -> bool:
    """Whether users other than root can get to ``path`` (every directory on the way lets others through)."""
    import stat

    current = Path(path)
    for part in [*reversed(current.parents), current]:
        try:
            if not part.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _existing_dirs(parent: str) -> list[Path]:
    try:
        return [p.resolve() for p in Path(parent).iterdir() if p.is_dir()]
    except OSError:
        return []


def wrap(argv: list[str], level: str, work_dir: str, host_access: frozenset[str] | set[str] = frozenset(),
         data: Iterable[tuple[Any, ...]] = ()) -> list[str]:
    """``argv`` run at isolation ``level`` (already resolved), starting in ``work_dir``;
    ``host_access`` is what the pool's bridges declared (``BridgeInfo.host_access``), ``data``
    the (real path, writable) pairs they and the policies declared (``data_paths``, checked
    by ``check_data_path``)."""
    if level == "none":
        return argv
    # A uid-0 worker keeps CAP_SETFCAP alone: without it the kernel refuses it the user
    # namespace the jail of untrusted code needs (mapping uid 0 takes CAP_SETFCAP), and
    # every untrusted spec failed in it. It grants nothing a uid-0 file owner lacks (it
    # can already chmod u+s what it owns); with no_new_privs, file capabilities never
    # raise the worker's own. ``user`` workers need nothing: nobody maps itself.
    bounding = "-all,+setfcap" if level == "namespace" else "-all"
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", f"--bounding-set={bounding}"]
    plan = fence_plan(level, work_dir, host_access, data)
    own_net = "network" not in host_access
    plan["loopback"] = own_net
    if level == "user":
        group = _docker_group() if "docker" in host_access else None
        groups = "--clear-groups" if group is None else f"--groups={group}"
        drop[1:1] = [f"--reuid={NOBODY}", f"--regid={NOBODY}", groups]
    lines = ["set -e",
             " ".join(shlex.quote(a) for a in [sys.executable, "-I", "-S", "-c", SETUP, json.dumps(plan)]),
             f"cd {shlex.quote(work_dir)}",
             # not exec: this shell stays PID 1 of the namespace, so the worker is an ordinary
             # process (signals act on it as usual) and its exit status comes back to the parent
             " ".join(shlex.quote(a) for a in [*drop, "--", *argv])]
    return ["unshare", "--mount", "--pid", *(["--net"] if own_net else []), "--fork", "--mount-proc", "--kill-child",
            "--propagation", "private", "--", "sh", "-c", "\n".join(lines)]


def fence_plan(level: str, work_dir: str, host_access: frozenset[str] | set[str] = frozenset(),
               data: Iterable[tuple[Any, ...]] = (), keep: Iterable[str] = (),
               scratch: Iterable[str] = SCRATCH) -> dict[str, Any]:
    """What ``SETUP`` mounts for a worker at ``level`` (``namespace`` or ``user``) in
    ``work_dir``; ``keep`` are more directories bound back writable (a Ray session's), and
    only ``scratch`` directories get a fresh writable stand-in (the others are not hidden)."""
    work = str(Path(work_dir).resolve())
    for hidden in _roots():
        if Path(work) == hidden or hidden.is_relative_to(work):
            raise errors.EnvhError(f"The workers' directory {work} holds {hidden}, which they are kept out of: "
                                   "choose a directory of their own.")
    binds: list[list[Any]] = []
    hide: list[list[str]] = []
    sealed: list[str] = []
    scratch = set(scratch)
    for root, needed in _hidden_roots().items():
        if root in SCRATCH and root not in scratch:
            binds.append([root, root, True, False, True])  # kept as it is (Ray's shared memory)
            continue
        hide.append([root, "1777" if root in scratch else "0755"])
        if root not in scratch:
            sealed.append(root)
        binds += [[p, p, False, False, True] for p in needed]
    binds.append([work, work, True, False, False])
    binds += [[str(Path(p).resolve()), str(Path(p).resolve()), True, level == "user", True] for p in keep]
    for path, writable, *own in sorted(set(data)):  # (path, writable[, as the worker's own])
        # a writable idmapped bind lets nobody make root-owned files, setuid ones too: only where
        # no other user can reach them (else it would plant a setuid-root program for them)
        mapped = level == "user" and (own[0] if own else True) and not (writable and _reachable(path))
        binds.append([path, path, writable, mapped, False])
    masks: list[str] = []
    if level == "namespace":
        masks += [p for p in ROOT_ONLY if os.path.lexists(p)]
    if "docker" not in host_access:
        sockets, dirs = _docker_paths()
        masks += sockets + dirs
    return {"binds": binds, "hide": hide, "masks": masks, "sealed": sealed,
            "proc_sealed": list(PROC_SEALED) if level == "namespace" else [],
            "dev": list(DEVICES) if level == "namespace" else []}


def describe_status(returncode: int | None, level: str) -> str:
    """A worker's exit status in words; through the namespace shell a signal death is
    reported as 128 + the signal number."""
    import signal

    if returncode is None:
        return "is unresponsive"
    number = -returncode if returncode < 0 else returncode - 128 if level != "none" and returncode > 128 else 0
    if number:
        try:
            return f"was killed by {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    return f"exited with status {returncode}"
