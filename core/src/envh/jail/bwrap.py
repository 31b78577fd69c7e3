"""Commands that run a process under bubblewrap: new user, pid, net, ipc, uts and mount
namespaces, no capabilities, an empty environment, and only the paths it is given.

Reusable beyond the contract jail: any process that runs code the parent must not trust
(a rollout worker, a policy) can be started with ``sandboxed_command(argv, ...)`` and then
cannot see the parent's processes (``/proc/<ppid>/environ``), environment or files.

Run by root, bubblewrap's user namespace maps the sandbox's uid to host uid 0, and the
kernel exempts host root from ``RLIMIT_NPROC``: a process there can fork whatever limit it
sets. ``host_uid`` runs the process as that unprivileged host uid instead (no user
namespace; bubblewrap sets up the mounts as root, then ``setpriv`` drops to the uid with
every capability gone and ``no_new_privs`` set).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence

#: The system's shared libraries and binaries; read-only, holding no secrets.
SYSTEM_PATHS = ("/usr",)
NOBODY = 65534


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def python_paths() -> list[str]:
    """What a jailed ``python -I -S`` needs of this interpreter: its installation prefix."""
    prefix = os.path.realpath(sys.base_prefix)
    return [prefix] if not prefix.startswith("/usr") else []


def sandboxed_command(argv: Sequence[str], *, ro_binds: Iterable[str] = (), rw_binds: Iterable[str] = (),
                      env: Mapping[str, str] | None = None, share_net: bool = False,
                      cwd: str = "/tmp", uid: int = NOBODY, host_uid: int | None = None) -> list[str]:
    """``argv`` wrapped in a ``bwrap`` call. ``ro_binds``/``rw_binds`` are host paths
    mounted at the same place (read-only / writable); ``env`` is the whole environment the
    process gets; ``/tmp`` is a fresh tmpfs and ``/proc`` shows only the sandbox's own
    processes. ``uid`` is the uid the process sees in its user namespace; with
    ``host_uid``, a caller running as root runs the process as that unprivileged host uid
    (the bound paths must then be readable by it). Raises ``FileNotFoundError`` when
    bubblewrap (or, for ``host_uid``, util-linux's ``setpriv``) is not installed
    (``dev/setup.d/jail.sh`` installs them)."""
    exe = bwrap_path()
    if exe is None:
        raise FileNotFoundError("bubblewrap (bwrap) is not installed; run dev/setup.d/jail.sh "
                                "or apt-get install bubblewrap")
    drop = _drop_to(host_uid) if host_uid is not None and os.geteuid() == 0 else []
    # bwrap itself is pid 1 of the sandbox and its /proc/1/environ is readable from inside:
    # it must start with an empty environment whatever the caller passes
    cmd = [shutil.which("env") or "/usr/bin/env", "-i", exe, "--die-with-parent", "--new-session", "--clearenv"]
    cmd += _namespaces(share_net, uid=None if drop else uid)
    for path in SYSTEM_PATHS:
        cmd += ["--ro-bind", path, path]
    for link in ("lib", "lib64", "bin", "sbin"):
        target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
        if target is not None:
            cmd += ["--symlink", target, f"/{link}"]
        elif os.path.isdir(f"/{link}"):
            cmd += ["--ro-bind", f"/{link}", f"/{link}"]
    # the fresh /tmp, /proc and /dev first: binds of paths under /tmp (a checkout or a venv
    # living there) are mounted on top of the tmpfs, not hidden by it
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    ro = list(dict.fromkeys(p for p in ro_binds if os.path.exists(p)))
    rw = list(rw_binds)
    if drop:  # the directories bwrap makes for the binds: 0700 root's, unless made first
        cmd += _parent_dirs([*ro, *rw])
    for path in ro:
        cmd += ["--ro-bind", path, path]
    for path in rw:
        cmd += ["--bind", path, path]
    cmd += ["--chdir", cwd]
    for key, value in (env or {}).items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *drop, *argv]


def _namespaces(share_net: bool, *, uid: int | None) -> list[str]:
    """bwrap's namespace and capability options: every namespace, with a user namespace
    mapping ``uid`` to the caller's uid; or, for ``uid=None`` (root dropping to a host uid
    itself), every namespace but the user one, keeping only the capabilities ``setpriv``
    needs to change uid."""
    if uid is not None:
        return ["--unshare-all", *(["--share-net"] if share_net else []), "--cap-drop", "ALL",
                "--uid", str(uid), "--gid", str(uid)]
    return ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
            *([] if share_net else ["--unshare-net"]),
            "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]


def _parent_dirs(paths: Iterable[str]) -> list[str]:
    """``--dir`` options (mode 0755) for every directory above ``paths`` below ``/``, so an
    unprivileged uid can reach what is bound there."""
    out: list[str] = []
    made = {"/", "/tmp", "/proc", "/dev", *SYSTEM_PATHS}
    for path in paths:
        parents = []
        parent = os.path.dirname(os.path.normpath(path))
        if any(parent.startswith(f"{system}/") for system in SYSTEM_PATHS):
            continue  # inside a system path, bound read-only as a whole already
        while parent not in made and parent != os.path.dirname(parent):
            parents.append(parent)
            parent = os.path.dirname(parent)
        for directory in reversed(parents):
            made.add(directory)
            out += ["--perms", "0755", "--dir", directory]
    return out


def _drop_to(host_uid: int) -> list[str]:
    """The command prefix that runs the rest as ``host_uid`` with no capabilities left."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise FileNotFoundError("setpriv (util-linux) is not installed; the sandbox needs it to run "
                                "as an unprivileged uid: apt-get install util-linux")
    return [setpriv, f"--reuid={host_uid}", f"--regid={host_uid}", "--clear-groups", "--inh-caps=-all",
            "--no-new-privs", "--"]
