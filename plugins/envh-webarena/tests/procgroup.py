"""The processes of one browser (its process group) as the tests see them in /proc."""

from __future__ import annotations

import os


def group_pids(pgid: int) -> list[int]:
    """Every live process whose process group is ``pgid``."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                    out.append(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return out


def renderers(pgid: int) -> set[int]:
    """The group's renderer processes."""
    out = set()
    for pid in group_pids(pgid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--type=renderer" in f.read():
                    out.add(pid)
        except OSError:
            continue
    return out


def socket_inodes(pgid: int) -> set[str]:
    """The inodes of the sockets the group's processes hold open."""
    out = set()
    for pid in group_pids(pgid):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    out.add(target[8:-1])
        except OSError:
            continue
    return out
