"""Commands that run a process under bubblewrap: new user, pid, net, ipc, uts and mount
namespaces, no capabilities, an empty environment, and only the paths it is given.

Reusable beyond the contract jail: any process that runs code the parent must not trust
(a rollout worker, a policy) can be started with ``sandboxed_command(argv, ...)`` and then
cannot see the parent's processes (``/proc/<ppid>/environ``), environment or files.
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
                      cwd: str = "/tmp", uid: int = NOBODY) -> list[str]:
    """``argv`` wrapped in a ``bwrap`` call. ``ro_binds``/``rw_binds`` are host paths
    mounted at the same place (read-only / writable); ``env`` is the whole environment the
    process gets; ``/tmp`` is a fresh tmpfs and ``/proc`` shows only the sandbox's own
    processes. Raises ``FileNotFoundError`` when bubblewrap is not installed
    (``dev/setup.d/jail.sh`` installs it)."""
    exe = bwrap_path()
    if exe is None:
        raise FileNotFoundError("bubblewrap (bwrap) is not installed; run dev/setup.d/jail.sh "
                                "or apt-get install bubblewrap")
    # bwrap itself is pid 1 of the sandbox and its /proc/1/environ is readable from inside:
    # it must start with an empty environment whatever the caller passes
    cmd = [shutil.which("env") or "/usr/bin/env", "-i", exe, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           "--uid", str(uid), "--gid", str(uid), "--clearenv"]
    if share_net:
        cmd.append("--share-net")
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
    seen: set[str] = set()
    for path in ro_binds:
        if path not in seen and os.path.exists(path):
            seen.add(path)
            cmd += ["--ro-bind", path, path]
    for path in rw_binds:
        cmd += ["--bind", path, path]
    cmd += ["--chdir", cwd]
    for key, value in (env or {}).items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *argv]
