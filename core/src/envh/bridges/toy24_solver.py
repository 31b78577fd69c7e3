"""Exact solver for the 24 game: is a puzzle solvable, and a plan that solves it.

A plan is a list of ``(i, j, op)`` steps in the bridge's own index semantics: both
numbers are removed and the result is appended at the end.
"""

from __future__ import annotations

import functools
from fractions import Fraction

OPS = ("add", "sub", "mul", "div")


def apply(a: Fraction, b: Fraction, op: str) -> Fraction | None:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return None if b == 0 else a / b
    raise ValueError(f"unknown op {op!r}")


def combine(numbers: list[Fraction], i: int, j: int, op: str) -> list[Fraction] | None:
    """The number list after ``combine(i, j, op)``; ``None`` if the operation is undefined."""
    result = apply(numbers[i], numbers[j], op)
    if result is None:
        return None
    return [n for k, n in enumerate(numbers) if k not in (i, j)] + [result]


@functools.lru_cache(maxsize=4096)
def _solve(numbers: tuple[Fraction, ...], target: Fraction) -> tuple[tuple[int, int, str], ...] | None:
    if target in numbers:
        return ()
    n = len(numbers)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            for op in OPS:
                if op in ("add", "mul") and j < i:
                    continue  # commutative: one order suffices
                nxt = combine(list(numbers), i, j, op)
                if nxt is None:
                    continue
                rest = _solve(tuple(nxt), target)
                if rest is not None:
                    return ((i, j, op), *rest)
    return None


def solve(numbers: list[int] | list[Fraction], target: int = 24) -> list[tuple[int, int, str]] | None:
    """A shortest-first plan reaching ``target``, or ``None`` when there is none."""
    return None if (plan := _solve(tuple(Fraction(x) for x in numbers), Fraction(target))) is None \
        else list(plan)


def solvable(numbers: list[int], target: int = 24) -> bool:
    return solve(numbers, target) is not None
