"""How a worker process is fenced off from its parent (DESIGN invariant 3: workers never
see the parent's secrets, even as root).

Levels (``isolation=``):

* ``none``: a plain child process (its environment is still scrubbed).
* ``namespace``: its own PID and mount namespaces with a fresh ``/proc`` (the parent and
  every other process are invisible, so ``/proc/<ppid>/environ`` does not exist), no
  capabilities but ``CAP_SETFCAP`` (the jail of untrusted code needs it to map uid 0 into
  its user namespace) and no way to gain any (``no_new_privs``). It keeps the parent's
  uid, so it reads what the parent's user owns — data in private temporary directories
  keeps working — and, as uid 0, can write what root owns: it fences off the parent's
  secrets, not the host from hostile code (that is the jail's and ``user``'s job).
* ``user``: ``namespace`` plus the uid and gid of ``nobody``: it reads only
  world-readable files and its own work directory; the parent's home is replaced by an
  empty one, with just the Python installation bound back read-only.

At ``namespace`` and ``user`` the Docker daemon (its sockets, and containerd's, are root on
the host) is out of reach unless the bridges the pool plays declare ``host_access=("docker",)``
(``BridgeInfo``): its sockets are covered by ``/dev/null`` and its runtime directories by
an empty tmpfs; a ``user`` worker of such a bridge gets the socket's group. A daemon
reached over TCP (``DOCKER_HOST=tcp://...``) is not covered.

``auto`` is ``namespace`` for a root parent with ``unshare``/``setpriv`` (util-linux)
available, else ``none``; ``envh run`` asks for ``user``. Both need root (a non-root parent
has no secrets beyond its own user's to protect from a same-user child, and cannot make
namespaces without user namespaces).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

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
        return "namespace" if possible else "none"
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
              *(Path(p) for p in sys.path if p)}
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
    """Directories a ``nobody`` worker gets an empty stand-in for, each with the needed
    directories under it to bind back read-only: the parent's home always, and any other
    directory on the way to the Python installation or envh's code that others cannot
    traverse (a checkout in a private 0700 directory)."""
    import stat

    home = Path(os.path.expanduser("~")).resolve()
    needed = _needed()
    roots: set[Path] = {home} if str(home) != "/" else set()
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


def _docker_group() -> int | None:
    for path in _docker_paths()[0]:
        try:
            return os.stat(path).st_gid
        except OSError:
            continue
    return None


def wrap(argv: list[str], level: str, work_dir: str, host_access: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """``argv`` run at isolation ``level`` (already resolved), starting in ``work_dir``;
    ``host_access`` is what the pool's bridges declared (``BridgeInfo.host_access``)."""
    if level == "none":
        return argv
    # A uid-0 worker keeps CAP_SETFCAP alone: without it the kernel refuses it the user
    # namespace the jail of untrusted code needs (mapping uid 0 takes CAP_SETFCAP), and
    # every untrusted spec failed in it. It grants nothing a uid-0 file owner lacks (it
    # can already chmod u+s what it owns); with no_new_privs, file capabilities never
    # raise the worker's own. ``user`` workers need nothing: nobody maps itself.
    bounding = "-all,+setfcap" if level == "namespace" else "-all"
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", f"--bounding-set={bounding}"]
    lines = ["set -e"]
    if "docker" not in host_access:
        sockets, dirs = _docker_paths()
        lines += [f"mount --bind /dev/null {shlex.quote(p)}" for p in sockets]
        lines += [f"mount -t tmpfs -o mode=0755,size=1m envh-hidden {shlex.quote(p)}" for p in dirs]
    if level == "user":
        group = _docker_group() if "docker" in host_access else None
        groups = "--clear-groups" if group is None else f"--groups={group}"
        drop[1:1] = [f"--reuid={NOBODY}", f"--regid={NOBODY}", groups]
        n = 0
        work = str(Path(work_dir).resolve())
        for root, binds in _hidden_roots().items():
            staged = []
            # the worker's own directory comes back writable when it lies under a hidden root
            wanted = [(p, True) for p in binds] + ([(work, False)] if work.startswith(root + os.sep) else [])
            for path, read_only in wanted:  # stage each bind outside the root before hiding it
                lines.append(f"stage{n}=$(mktemp -d /tmp/envh-stage.XXXXXX)")
                lines.append(f"mount --rbind {shlex.quote(path)} \"$stage{n}\"")
                staged.append((n, path, read_only))
                n += 1
            lines.append(f"mount -t tmpfs -o mode=0755,size=1m envh-hidden {shlex.quote(root)}")
            for i, path, read_only in staged:
                lines.append(f"mkdir -p {shlex.quote(path)}")
                lines.append(f"mount --move \"$stage{i}\" {shlex.quote(path)}")
                if read_only:
                    lines.append(f"mount -o remount,bind,ro {shlex.quote(path)} || true")
                lines.append(f"rmdir \"$stage{i}\"")
    lines.append(f"cd {shlex.quote(work_dir)}")
    # not exec: this shell stays PID 1 of the namespace, so the worker is an ordinary
    # process (signals act on it as usual) and its exit status comes back to the parent
    lines.append(" ".join(shlex.quote(a) for a in [*drop, "--", *argv]))
    return ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child", "--propagation", "private",
            "--", "sh", "-c", "\n".join(lines)]


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
