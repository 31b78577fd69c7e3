"""The inline executor: episodes one after another in this process (for debugging and
for the fastest possible loop when isolation does not matter).

It runs the same ``run_episode`` as the pool and Ray workers, with one warm env per
spec; there is no worker to lose, so there are no retries, and no secrets scrubbing or
resource limits: untrusted contract code still runs in the sandbox.

The time limit holds against code that disables its timer: the runner's watchdog raises
the deadline into the episode, and an episode that cannot be stopped in-process (it
swallows every exception, or sits in one C call) is recorded as a ``timeout`` through
``on_abandon`` and the process ends with exit status ``ABANDONED_EXIT``. Nothing else
is possible in one process; the pool executor kills a worker from outside instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..runner import run_episode
from ..trajectory import EpisodeRequest, Trajectory
from ..warm import Warm
from .base import as_played
from .worker import preflight, preflight_error

#: Exit status of a process whose inline episode overran its limit and could not be stopped.
ABANDONED_EXIT = 75


class InlineExecutor:
    """Run episodes sequentially in-process. ``registry`` defaults to the process-wide one;
    ``timeout_s`` applies to requests that set none (a ``SIGALRM`` timer and a watchdog on
    the main thread, a check between steps elsewhere). ``on_abandon`` receives the
    ``timeout`` trajectory of an episode that could not be stopped, from the watchdog's
    thread, just before the process ends (``envh run`` appends it to the store)."""

    workers = 1

    def __init__(self, workers: int | None = None, *, registry: Any = None, timeout_s: float | None = None,
                 on_abandon: Callable[[Trajectory], None] | None = None, **_ignored: Any) -> None:
        self.timeout_s = timeout_s
        self.on_abandon = on_abandon
        self.warm = Warm(registry)

    def run(self, requests: Iterable[EpisodeRequest]) -> Iterator[Trajectory]:
        for request in requests:
            yield run_episode(as_played(request, self.timeout_s), self.warm, abandon=self._abandon)

    def _abandon(self, trajectory: Trajectory) -> None:
        """The episode cannot be stopped in this process: record it, say so, end the process."""
        try:
            if self.on_abandon is not None:
                self.on_abandon(trajectory)
        finally:
            try:
                sys.stderr.write(
                    f"envh: episode {trajectory.key}: {trajectory.error}. It is recorded as a timeout; ending the "
                    f"process (exit status {ABANDONED_EXIT}). Play untrusted policies and bridges with the pool "
                    "executor, which kills a worker from outside.\n")
                sys.stderr.flush()
            finally:
                os._exit(ABANDONED_EXIT)

    def check(self, policy: str, options: dict[str, Any], spec: dict[str, Any] | None = None,
              spec_id: str | None = None, trust: str = "untrusted", data: tuple[str, ...] = ()) -> None:
        """Build ``policy`` and the env of ``spec`` now (they stay warm for the run; ``data``:
        the host paths granted, as the run's requests carry them); ``PolicyError`` /
        ``EnvError`` with the cause when one cannot be built."""
        problem = preflight(self.warm, policy, options, spec, spec_id, trust, tuple(data))
        if problem:
            raise preflight_error(policy, problem, "here")

    def close(self) -> None:
        self.warm.close()

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
