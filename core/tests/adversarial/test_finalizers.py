"""Code run by a finalizer (a dropped generator's ``finally``) swallows the time-limit
exception: Python reports it as unraisable and carries on. Once a limit is hit every later
check fails, and a call that hit its limit fails even if the code swallowed the exception."""

from __future__ import annotations

import time

import envh
import pytest
from envh import Action
from envh.errors import ContractCodeError

ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
DROPPED = ("def w(i):\n    try:\n        yield i\n    finally:\n        while True:\n            pass\n\n"
           "def filter_action(action, state, memo):\n"
           "    memo['n'] = sum(map(next, map(w, range(10**5))))\n")
DROPPED_ITER = ("import itertools\ndef w(i):\n    try:\n        yield i\n    finally:\n"
                "        sum(itertools.repeat(1))\n\n"
                "def filter_action(action, state, memo):\n"
                "    memo['n'] = sum(map(next, map(w, range(10**5))))\n")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
@pytest.mark.parametrize("code", [DROPPED, DROPPED_ITER], ids=["loop", "iterator"])
def test_a_limit_swallowed_by_a_finalizer_still_stops_the_hook(code: str, trust: str) -> None:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust=trust)
    env.reset(task=None, seed=0)
    t0 = time.monotonic()
    with pytest.raises(ContractCodeError, match="loop iterations|time limit"):
        env.step(ADD)
    assert time.monotonic() - t0 < 15
    assert "n" not in env.memo
    env.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_next_call_has_its_full_budget_again() -> None:
    code = ("def w(i):\n    try:\n        yield i\n    finally:\n        while True:\n            pass\n\n"
            "def filter_action(action, state, memo):\n    if memo.get('hog'):\n"
            "        sum(map(next, map(w, range(10**5))))\n    total = 0\n"
            "    for i in range(60000):\n        total += i\n    memo['total'] = total\n")
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]})
    env.reset(task=None, seed=0)
    env.memo["hog"] = True
    with pytest.raises(ContractCodeError):
        env.step(ADD)
    env.memo.pop("hog")
    env.step(ADD)
    assert env.memo["total"] == sum(range(60000))
    env.close()
