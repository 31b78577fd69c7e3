"""The ``coach`` curriculum policy: a user function of the window statistics, run in the
jail like untrusted contract code. Its answers are checked (step, bounds, types); hostile
or broken coaches — escapes, hangs, memory bombs, bad returns — hold the values, are
audited, and never stop the run."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import time
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh.jail import bwrap_path
from envh_adaptive.coach import Coach, check_changes
from envh_adaptive.components.curriculum import CurriculumLayer
from envh_adaptive.curriculum import Curriculum, ParamBounds, ParamPlan

#: These tests choose the audit logs and libraries themselves: a spec that names a host path
#: needs the caller's trust (the default refuses it), so they build trusted, and say
#: ``trust="untrusted"`` where the refusal is what they test.
make = functools.partial(envh.make, trust="trusted")

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")

UP = "def coach(stats):\n    return {'level': 1} if stats['rate'] > 0.8 else None\n"


def plans(step: int = 1) -> dict[str, ParamPlan]:
    bounds = ParamBounds(name="level", low=1, high=10, default=2)
    return {"level": ParamPlan(bounds=bounds, low=1, high=10, init=3, step=step)}


def coached(code: str, **policy) -> Curriculum:
    return Curriculum(plans(policy.pop("step", 1)), window=policy.pop("window", 2), coach=Coach(code, **policy))


def window(cur: Curriculum, success: bool) -> dict:
    out = None
    while out is None:
        out = cur.end_episode(success)
    return out


def test_a_coach_moves_parameters_from_the_window_statistics() -> None:
    cur = coached(UP)
    d = window(cur, True)
    assert (d["decision"], d["before"], d["after"]) == ("coach", {"level": 3}, {"level": 4})
    assert "level +1" in d["reason"]
    assert window(cur, False)["decision"] == "hold" and cur.values == {"level": 4}


def test_the_coach_sees_read_only_statistics_and_keeps_a_memo() -> None:
    code = ("def coach(stats, memo):\n"
            "    memo['seen'] = memo.get('seen', []) + [stats['rate']]\n"
            "    memo['keys'] = sorted(stats)\n"
            "    memo['p'] = [stats['params']['level']['step'], stats['values']['level'], stats['window']]\n"
            "    return None\n")
    cur = coached(code)
    window(cur, True)
    window(cur, False)
    memo = cur.coach.memo
    assert memo["seen"] == [1.0, 0.0] and memo["p"] == [1, 3, 2]
    assert {"rate", "recent_rates", "windows_below", "floor", "ceiling", "values", "params"} <= set(memo["keys"])
    mutate = "def coach(stats):\n    stats['values']['level'] = 9\n    return None\n"
    cur = coached(mutate)
    d = window(cur, True)
    assert d["decision"] == "coach-failed" and "TypeError" in d["reason"] and cur.values == {"level": 3}


@pytest.mark.parametrize(("code", "message"), [
    ("import os\ndef coach(stats):\n    return None\n", "import of 'os' is not allowed"),
    ("def coach(stats):\n    return ().__class__.__bases__\n", "not allowed"),
    ("def coach(stats):\n    return open('/etc/passwd').read()\n", "'open' is not allowed"),
    ("def coach(stats):\n    return getattr(stats, 'x')\n", "'getattr' is not allowed"),
    ("x = [].append\ndef coach(stats):\n    return None\n", "method of a list"),
    ("def coach_entry(stats, box):\n    box['out'] = {'level': 5}\ndef coach(stats):\n    return None\n",
     "reserved"),
    ("def coach(stats):\n    return coach_entry\n", "reserved"),
    ("def helper(stats):\n    return None\n", "must define a top-level function coach"),
    ("def coach(stats, memo, extra):\n    return None\n", "not 3 parameters"),
    ("def coach(stats, memo={}):\n    return None\n", "no defaults"),
    ("print('hi')\ndef coach(stats):\n    return None\n", "not allowed"),
    ("def coach(stats):\n    return None\nwhile True:\n    pass\n", "only imports, constants and function"),
    ("def coach(stats)\n    return None\n", "syntax error"),
])
def test_escape_attempts_and_malformed_code_are_refused_before_the_run(code: str, message: str) -> None:
    with pytest.raises(errors.ContractCodeError, match=message):
        Coach(code)


def test_a_top_level_that_hangs_is_refused_at_build_in_the_jail() -> None:
    t0 = time.monotonic()
    with pytest.raises(errors.ContractCodeError, match="loop iterations|time limit|wall-clock|jail"):
        Coach("import math\nX = math.factorial(10**7)\ndef coach(stats):\n    return None\n")
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize(("code", "message"), [
    ("def coach(stats):\n    while True:\n        pass\n", "loop iterations|time limit"),
    ("import math\ndef coach(stats):\n    return math.factorial(10**7)\n", "wall-clock|jail process"),
    ("def coach(stats):\n    return 'x'.ljust(6 * 10**8)\n", "MemoryError|jail process"),
    ("def coach(stats):\n    return coach(stats)\n", "RecursionError|loop iterations"),
    ("def coach(stats):\n    raise ValueError('no idea')\n", "ValueError: no idea"),
    ("def coach(stats):\n    return [1]\n", "must return a dict"),
    ("def coach(stats):\n    return 'harder'\n", "must return a dict"),
    ("def coach(stats):\n    return {'level': 1.0}\n", "must be an integer"),
    ("def coach(stats):\n    return {'level': True}\n", "must be an integer"),
    ("def coach(stats):\n    return {'level': 2}\n", "exceeds its step 1"),
    ("def coach(stats):\n    return {'level': -10**30}\n", "exceeds its step"),
    ("def coach(stats):\n    return {'rooms': 1}\n", "not a planned parameter"),
    ("def coach(stats):\n    return {'level': {1, 2}}\n", "not JSON data"),
    ("def coach(stats):\n    return {'level': [0] * 600000}\n", "JSON values|jail"),
])
def test_failing_hanging_or_lying_coaches_hold_the_values_and_are_audited(code: str, message: str) -> None:
    cur = coached(code)
    t0 = time.monotonic()
    d = window(cur, True)
    assert time.monotonic() - t0 < 10
    assert d["decision"] == "coach-failed" and d["after"] == d["before"] == {"level": 3}
    assert re.search(message, d["reason"]), d["reason"]
    # the jail survives (or was restarted) and the next coach works
    cur2 = coached(UP)
    assert window(cur2, True)["after"] == {"level": 4}
    cur.coach.close()
    cur2.coach.close()


def test_a_coach_cannot_leave_the_range_and_the_memo_of_a_refused_answer_is_dropped() -> None:
    code = "def coach(stats, memo):\n    memo['n'] = memo.get('n', 0) + 1\n    return {'level': 1}\n"
    cur = Curriculum({"level": ParamPlan(bounds=ParamBounds(name="level", low=1, high=10, default=2),
                                         low=1, high=4, init=3)}, window=1, coach=Coach(code))
    assert [window(cur, True)["decision"] for _ in range(3)] == ["coach", "coach-failed", "coach-failed"]
    assert cur.values == {"level": 4} and cur.coach.memo == {"n": 1}


def test_check_changes_bounds_every_answer() -> None:
    p = plans(step=2)
    assert check_changes({"level": -2}, p, {"level": 3}) == {"level": -2}
    assert check_changes({"level": 0}, p, {"level": 3}) == {}
    for bad in ({"level": 3}, {"level": -3}, {"level": "1"}, {"level": None}, {"level": -2, "x": 0}):
        with pytest.raises(errors.ContractCodeError):
            check_changes(bad, p, {"level": 3})
    with pytest.raises(errors.ContractCodeError, match="outside"):
        check_changes({"level": -2}, p, {"level": 2})


def test_breaker_and_kill_switch_overrule_the_coach(monkeypatch: pytest.MonkeyPatch) -> None:
    always_up = "def coach(stats):\n    return {'level': 1}\n"
    cur = Curriculum(plans(), window=1, breaker=2, floor=0.5, coach=Coach(always_up))
    assert [window(cur, False)["decision"] for _ in range(2)] == ["coach", "breaker"]
    assert cur.values == {"level": 2}  # the safe default, though the coach pushed up
    monkeypatch.setenv("ENVH_CURRICULUM_FREEZE", "1")
    cur = Curriculum(plans(), window=1, coach=Coach(always_up))
    assert cur.values == {"level": 2} and window(cur, True)["decision"] == "frozen" and cur.values == {"level": 2}


def spec(code: str, audit: Path, **policy) -> dict:
    return {"bridge": "toy24", "layers": [{
        "kind": "curriculum", "training": True, "anchor": 0.0, "audit": str(audit),
        "params": {"size": {"range": [3, 5], "init": 3}},
        "policy": {"type": "coach", "code": code, "window": 4, **policy}}]}


#: a coach with memory: up after two good windows in a row, down after a bad one
STREAK = ("def coach(stats, memo):\n"
          "    good = memo.get('good', 0) + 1 if stats['rate'] >= 0.75 else 0\n"
          "    memo['good'] = good\n"
          "    if stats['rate'] < 0.5:\n"
          "        return {'size': -1} if stats['values']['size'] > 3 else None\n"
          "    if good >= 2 and stats['values']['size'] < 5:\n"
          "        memo['good'] = 0\n"
          "        return {'size': 1}\n"
          "    return None\n")


def play(env, episodes: int, rng: random.Random) -> list[int]:
    sizes = []
    for i in range(episodes):
        size = env.reset(seed=i).info["curriculum"]["params"]["size"]
        sizes.append(size)
        win = rng.random() < {3: 1.0, 4: 0.8, 5: 0.2}[size]
        for action in (env.unwrapped.solve() if win else [Action(tool="stop")]):
            env.step(action)
    return sizes


def test_coach_decisions_are_audited_replayed_from_the_log_and_resumed(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with make(spec(STREAK, audit)) as env:
        first = play(env, 60, random.Random(4))
        layer = next(e for e in envh.iter_layers(env) if isinstance(e, CurriculumLayer))
    state = layer.curriculum.state()
    assert len(set(first)) >= 2 and all(abs(a - b) <= 1 for a, b in zip(first, first[1:]))
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    decisions = [r for r in records if r["type"] == "decision"]
    assert len(decisions) == 15 and all("coach_memo" in d and d["reason"] for d in decisions)
    # resume: the log, not a re-run of the coach, restores values and memo; a coach that
    # would now decide differently does not rewrite history
    never = "def coach(stats):\n    return None\n"
    with make(spec(never, audit)) as env:
        assert next(e for e in envh.iter_layers(env) if isinstance(e, CurriculumLayer)).curriculum.state() == state
    # a tampered decision (a jump of two) is refused on resume
    tampered = [dict(r) for r in records]
    moved = next(r for r in tampered if r["type"] == "decision" and r["decision"] == "coach")
    moved["after"] = {"size": moved["before"]["size"] + 2}
    audit.write_text("".join(json.dumps(r) + "\n" for r in tampered))
    with pytest.raises(errors.StateError, match="not a change the coach may make"):
        make(spec(STREAK, audit))


def test_a_coach_spec_is_checked_before_the_run(tmp_path: Path) -> None:
    for policy, message in (({"code": 5}, "needs 'code'"), ({"time_limit_ms": "5"}, "must be a number"),
                            ({"time_limit_ms": 60_000}, "time_limit_ms must be in"),
                            ({"ceilng": 0.9}, "Unknown curriculum policy options")):
        with pytest.raises(errors.EnvhError, match=message):
            make(spec(policy.pop("code", UP), tmp_path / "a.jsonl", **policy))
    with pytest.raises(errors.ContractCodeError, match="import of 'subprocess'"):
        make(spec("import subprocess\ndef coach(stats):\n    return None\n", tmp_path / "a.jsonl"))


def test_a_coach_memo_is_bounded_because_every_decision_logs_it() -> None:
    cur = coached("def coach(stats, memo):\n    memo['x'] = 'y' * 70000\n    return {'level': 1}\n")
    d = window(cur, True)
    assert d["decision"] == "coach-failed" and "byte limit" in d["reason"] and cur.coach.memo == {}
    assert len(json.dumps(d)) < 5000
