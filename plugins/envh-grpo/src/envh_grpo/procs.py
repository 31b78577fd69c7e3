"""Launched process trees that end with their owner.

``torchrun`` starts each training process in a session of its own, so killing the
launcher (a timeout, Ctrl-C, a test that failed) leaves the workers running, holding
gigabytes and a gloo group. Every process of a job carries ``ENVH_GRPO_JOB=<tag>`` in
its environment (inherited by whatever it starts), and ``reap`` ends exactly the
processes with that tag: nothing another program started is touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence

TAG = "ENVH_GRPO_JOB"


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries ``tag`` (read from /proc)."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # gone, or not ours to read
            continue
    return found


def reap(tag: str, grace_s: float = 5.0) -> list[int]:
    """SIGTERM every process of the job, then SIGKILL what is left after ``grace_s``;
    returns the pids that were still alive."""
    pids = tagged(tag)
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and (alive := [p for p in pids if _alive(p)]):
            time.sleep(0.1)
            pids = alive
        pids = [p for p in pids if _alive(p)]
        if not pids:
            break
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie is dead (its parent reaps it)
    except OSError:
        return False


def run_job(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float | None = None,
            capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` as a tagged job and reap every process of it when it returns, times
    out or is interrupted; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
    tag = new_tag()
    job_env = dict(os.environ if env is None else env, **{TAG: tag})
    pipe = subprocess.PIPE if capture else None
    proc = subprocess.Popen(list(cmd), env=job_env, stdout=pipe, stderr=pipe, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)
    finally:
        reap(tag)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
