"""Keeping a jail's process stopped between calls.

Code that got out of the sandbox owns the jail's Python: it can install a signal handler
or a timer that runs after its call has answered, and undo anything the worker does to
reset them. SIGSTOP is the one thing it cannot catch, block or ignore (and it cannot start
another process to send SIGCONT: RLIMIT_NPROC is 0), so the host stops the process when
an answer has arrived and continues it just before the next call, whose wall-clock and
CPU limits then bound whatever was left behind.
"""

from __future__ import annotations

import os
import signal

from .. import errors


class Stopper:
    """SIGSTOP / SIGCONT for the jail's Python, the innermost process under ``root`` (the
    jail's process itself, or bubblewrap's chain of processes above it). The process is
    found on the first ``stop``, after it has answered (so it exists), and addressed by a
    pidfd, so a recycled pid is never signalled."""

    def __init__(self, root: int) -> None:
        self.root = root
        self._pid: int | None = None
        self._fd: int | None = None

    def stop(self) -> None:
        if self._pid is None:
            self._pid = _innermost(self.root)
            try:
                self._fd = os.pidfd_open(self._pid)
            except (AttributeError, OSError):  # no pidfd here: the pid, found a moment ago
                self._fd = None
        self._send(signal.SIGSTOP)

    def cont(self) -> None:
        if self._pid is not None:
            self._send(signal.SIGCONT)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _send(self, sig: int) -> None:
        try:
            if self._fd is not None:
                signal.pidfd_send_signal(self._fd, sig)
            elif self._pid is not None:
                os.kill(self._pid, sig)
        except ProcessLookupError:  # it died: the exchange that needs it finds out
            pass


def _innermost(root: int) -> int:
    """The process at the end of the single-child chain below ``root``. Raises
    ``JailError`` when the chain forks (a jail's processes never do)."""
    pid = root
    while True:
        kids = _children(pid)
        if not kids:
            return pid
        if len(kids) > 1:
            raise errors.JailError(f"the jail's process {pid} has {len(kids)} children; a jail's "
                                   "process chain never forks, so it cannot be stopped between calls safely")
        pid = kids[0]


def _children(pid: int) -> list[int]:
    """``pid``'s children: the kernel's list, else a scan of every process's parent."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(k) for k in fh.read().split()]
    except FileNotFoundError:
        pass
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return out
