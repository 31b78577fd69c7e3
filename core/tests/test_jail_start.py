"""A jail's interpreter start is not its program's time: on a loaded machine the start
alone took over 3 s, longer than a load's whole wall-clock limit, and honest programs
failed to load. The first exchange with a fresh process gets ``process.START_S`` more
wall time; every later one has only its own limit."""

from __future__ import annotations

import os
import time

import pytest
from envh import Action
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path, process, wire

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")

ADD = wire.encode(Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}))
HOOK = "def filter_action(action, state, memo):\n    return None\n"
#: the simulated start: the jail's command begins only after this many seconds
SLOW_START_S = 1.5


class SlowStartJail(Jail):
    """A jail whose process takes ``SLOW_START_S`` to start, as on a loaded machine (the
    real jail command, begun after a sleep). Only the first start is slow, unless
    ``always`` is set."""

    def __init__(self, *, always: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.always, self.starts = always, 0

    def _command(self) -> list[str]:
        command = super()._command()
        self.starts += 1
        if self.starts > 1 and not self.always:
            return command
        return ["/bin/sh", "-c", f'sleep {SLOW_START_S}; exec "$0" "$@"', *command]


def test_a_slow_start_does_not_fail_an_honest_load() -> None:
    jail = SlowStartJail(busy_s=0.1)
    try:
        # the load's own wall limit is 2 x 0.05 + 0.1 + LOAD_S = 1.2 s, under the start
        assert jail.wall(0.05) + process.LOAD_S < SLOW_START_S
        began = time.monotonic()
        pid = jail.load(HOOK, ("filter_action",), time_limit=0.05, max_ops=10_000)
        assert time.monotonic() - began >= SLOW_START_S
        assert jail.call(pid, "filter_action", [ADD], None, {}, time_limit=0.05)[0] is None
        assert jail.restarts == 0
    finally:
        jail.close()


def test_only_the_first_exchange_of_a_process_gets_the_start_allowance() -> None:
    """After the start, the same slowness in an exchange is past its limit: a jail whose
    process was killed restarts (slowly, and that start is allowed for again), and a call
    that waits as long as the start did times out."""
    jail = SlowStartJail(busy_s=0.1, always=True)
    try:
        pid = jail.load(HOOK, ("filter_action",), time_limit=0.05, max_ops=10_000)
        os.kill(jail.pid, 9)  # killed from outside between calls: the next call restarts it
        jail._proc.wait(5)  # noqa: SLF001 - wait until it is gone, so the call sees a dead process
        assert jail.call(pid, "filter_action", [ADD], None, {}, time_limit=0.05)[0] is None
        assert jail.starts == 2 and jail.restarts == 1
    finally:
        jail.close()
    jail = Jail(busy_s=0.1)
    try:
        pid = jail.load(HOOK, ("filter_action",), time_limit=0.05, max_ops=10_000)
        stopper = jail._stopper  # noqa: SLF001 - the jail's own stopper, to starve it as a loaded machine would
        assert stopper is not None
        # a stopped jail gets no CPU: the call's wall limit (0.2 s) ends it, with no allowance
        original = stopper.cont
        stopper.cont = lambda: None  # type: ignore[method-assign]
        began = time.monotonic()
        with pytest.raises(ContractCodeError, match="wall-clock limit"):
            jail.call(pid, "filter_action", [ADD], None, {}, time_limit=0.05)
        assert time.monotonic() - began < process.START_S / 2
        stopper.cont = original  # type: ignore[method-assign]
    finally:
        jail.close()
