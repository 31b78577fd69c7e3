"""The inline executor: episodes one after another in this process (for debugging and
for the fastest possible loop when isolation does not matter).

It runs the same ``run_episode`` as the pool and Ray workers, with one warm env per
spec; there is no worker to lose, so there are no retries, and no secrets scrubbing or
resource limits: untrusted contract code still runs in the sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..runner import run_episode
from ..trajectory import EpisodeRequest, Trajectory
from ..warm import Warm
from .base import with_timeout
from .worker import preflight, preflight_error


class InlineExecutor:
    """Run episodes sequentially in-process. ``registry`` defaults to the process-wide one;
    ``timeout_s`` applies to requests that set none (a ``SIGALRM`` timer on the main
    thread, a check between steps elsewhere)."""

    workers = 1

    def __init__(self, workers: int | None = None, *, registry: Any = None, timeout_s: float | None = None,
                 **_ignored: Any) -> None:
        self.timeout_s = timeout_s
        self.warm = Warm(registry)

    def run(self, requests: Iterable[EpisodeRequest]) -> Iterator[Trajectory]:
        for request in requests:
            yield run_episode(with_timeout(request, self.timeout_s), self.warm)

    def check(self, policy: str, options: dict[str, Any], spec: dict[str, Any] | None = None,
              spec_id: str | None = None) -> None:
        """Build ``policy`` and the env of ``spec`` now (they stay warm for the run);
        ``PolicyError`` / ``EnvError`` with the cause when one cannot be built."""
        problem = preflight(self.warm, policy, options, spec, spec_id)
        if problem:
            raise preflight_error(policy, problem, "here")

    def close(self) -> None:
        self.warm.close()

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
