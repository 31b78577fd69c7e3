"""Policies that try to outlive the episode's time limit in the process that runs them,
registered as a plugin module (``--plugin evaders`` with this folder on ``PYTHONPATH``).

Each disables the ``SIGALRM`` timer its own way and then works past the limit. The loops
end by themselves after ``seconds`` (default 20), so a runner whose limit does not hold
makes a test fail on time instead of hanging it.
"""

from __future__ import annotations

import re
import signal
import time

import envh
from envh import Action
from envh.rollout.policy import PolicyStep


def _burn(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(500))


class Evader:
    """``how``: ``ignore`` (SIG_IGN), ``disarm`` (``signal.alarm(0)`` and ``setitimer``),
    ``block`` (``pthread_sigmask``), ``handler`` (a handler that does nothing); then it
    spins for ``seconds`` (``swallow``: and swallows every exception raised meanwhile;
    ``sleep``: sleeps in one C call instead of spinning; ``regex``: runs a catastrophic
    regular expression, one C call that holds the GIL for hours). ``then``: on the first
    exception, ``raise`` another one or ``answer`` with an action (``how=none`` leaves the
    timer working, so that exception is the deadline itself)."""

    def __init__(self, arg: str | None = None, how: str = "ignore", seconds: float = 20.0, swallow: bool = False,
                 sleep: bool = False, regex: bool = False, then: str = "", **options: object) -> None:
        self.how = arg or how
        self.seconds, self.swallow, self.sleep, self.regex = float(seconds), swallow, sleep, regex
        self.then = then
        self.policy_id = f"test-evader:{self.how}"

    def start(self, *, task, tools, observation, seed=None):
        pass

    def disable_timer(self) -> None:
        if self.how == "ignore":
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        elif self.how == "disarm":
            signal.alarm(0)
            signal.setitimer(signal.ITIMER_REAL, 0)
        elif self.how == "block":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        elif self.how == "handler":
            signal.signal(signal.SIGALRM, lambda *_: None)
        elif self.how == "none":  # leaves the timer alone (see ``then``)
            pass
        else:
            raise ValueError(f"unknown way {self.how!r}")

    def act(self, observation, tools):
        self.disable_timer()
        if self.regex:
            re.match(r"(a+)+$", "a" * 40 + "b")
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            try:
                if self.sleep:
                    time.sleep(end - time.monotonic())
                else:
                    _burn(0.05)
            except BaseException as exc:  # noqa: BLE001 - the point: nothing raised here gets out
                if self.then == "raise":  # the deadline turned into an ordinary error
                    raise ValueError("something else went wrong") from exc
                if self.then == "answer":  # the deadline swallowed, an answer given all the same
                    return PolicyStep(action=Action(tool="stop"), raw="stop after the deadline")
                if not self.swallow:
                    raise
        return PolicyStep(action=Action(tool="stop"), raw="stop")

    def close(self):
        pass


class Punctual:
    """Ignores the timer and works ``arg`` seconds, then stops: finishes near the limit."""

    policy_id = "test-punctual"

    def __init__(self, arg: str | None = None, **options: object) -> None:
        self.seconds = float(arg or 0.05)

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        _burn(self.seconds)
        return PolicyStep(action=Action(tool="stop"), raw="stop")

    def close(self):
        pass


@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="evader", factory=Evader), envh.PolicyInfo(name="punctual", factory=Punctual)]
