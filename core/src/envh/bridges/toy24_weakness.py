"""Toy24's own weakness predicates (core contributes them through
``envh_weakness_predicates`` with ``bridge="toy24"``, as a bridge plugin does).

* ``toy24.bad-position``: the policy named a position that does not exist (or the same
  one twice) at least ``n`` times (the bridge answers ``bad_position``);
* ``toy24.revisits``: the numbers return to a state the episode already had (a
  ``reset()`` or a combination that undoes an earlier one), at least ``n`` times.

Each is ``fn(trajectory, *args) -> bool`` over a recorded trajectory.
"""

from __future__ import annotations

from typing import Any


def _count(n: str) -> int:
    if not str(n).isdigit() or int(n) < 1:
        raise ValueError(f"a count is a whole number >= 1, got {n!r}")
    return int(n)


def bad_position(t: Any, n: str = "1") -> bool:
    return sum(1 for s in t.steps if (s.error or {}).get("type") == "bad_position") >= _count(n)


def _numbers(obs: Any) -> tuple[str, ...] | None:
    data = getattr(obs, "data", None) or {}
    nums = data.get("numbers")
    return tuple(sorted(str(x) for x in nums)) if nums is not None else None


def revisits(t: Any, n: str = "1") -> bool:
    # the bridge's own observations (before any layer masked them) carry the true numbers;
    # a step that leaves the numbers as they were (stop, a refused action) moves nowhere
    first = t.initial_base_observation or t.initial_observation
    states = [_numbers(first)] + [_numbers(s.base_observation or s.observation) for s in t.steps]
    seen: set[tuple[str, ...]] = set()
    previous, found = None, 0
    for state in states:
        if state is None or state == previous:
            continue
        found += state in seen
        seen.add(state)
        previous = state
    return found >= _count(n)
