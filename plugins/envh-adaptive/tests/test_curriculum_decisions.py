"""The curriculum's decisions have stated error rates: "easier" at a true rate inside the
band [floor, ceiling] happens in at most ALPHA of windows, computed exactly and checked
against the real decision code by simulation; the breaker waits for full windows."""

from __future__ import annotations

import random

import pytest
from envh_adaptive.curriculum import ALPHA, Curriculum, ParamBounds, ParamPlan

BOUNDS = ParamBounds(name="level", low=1, high=10, default=1)


def curriculum(**policy) -> Curriculum:
    return Curriculum({"level": ParamPlan(bounds=BOUNDS, low=1, high=10, init=5)}, **policy)


def simulate(cur: Curriculum, p: float, windows: int, seed: int) -> dict[str, int]:
    """Play ``windows`` windows at a true rate ``p`` through ``end_episode``, putting the
    level back after every decision so each window starts like the first."""
    rng, counts = random.Random(seed), {"harder": 0, "easier": 0, "hold": 0, "breaker": 0}
    for _ in range(windows):
        d = None
        while d is None:
            d = cur.end_episode(rng.random() < p)
        counts[d["decision"]] += 1
        cur.values, cur.fresh, cur.below = {"level": 5}, False, 0
    return counts


@pytest.mark.parametrize("early", [True, False])
def test_stepping_back_at_an_in_band_rate_is_at_most_alpha_exactly(early: bool) -> None:
    cur = curriculum(window=20, floor=0.6, ceiling=0.85, early=early)
    assert cur.operating_characteristic(0.7)["easier"] <= 0.10
    for p in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85):  # the worst in-band rate is the floor
        assert cur.operating_characteristic(p)["easier"] <= ALPHA
    assert cur.operating_characteristic(0.2)["easier"] >= 0.99  # and it still steps back when it should
    for window in (5, 10, 40):
        assert curriculum(window=window, early=early).operating_characteristic(0.6)["easier"] <= ALPHA


def test_the_real_decisions_match_the_stated_rates_over_10k_windows() -> None:
    cur = curriculum(window=20, floor=0.6, ceiling=0.85)
    counts = simulate(cur, 0.7, 10_000, seed=7)
    assert counts["breaker"] == 0
    assert counts["easier"] / 10_000 <= 0.10  # the early rule of old stepped back in 25.5 % here
    exact = cur.operating_characteristic(0.7)
    for kind in ("easier", "harder"):  # 4 standard errors at most
        assert abs(counts[kind] / 10_000 - exact[kind]) <= 4 * (exact[kind] * (1 - exact[kind]) / 10_000) ** 0.5


def test_the_breaker_needs_full_windows() -> None:
    cur = Curriculum({"level": ParamPlan(bounds=BOUNDS, low=1, high=10, init=1)}, window=20, breaker=3)
    decisions = [(i, d) for i in range(1, 61) if (d := cur.end_episode(False)) is not None]
    assert [(i, d["decision"]) for i, d in decisions] == [(20, "hold"), (40, "hold"), (60, "breaker")]
    # above the easiest level, early steps back never count toward it
    cur = curriculum(window=20, breaker=3)
    decisions = [d for d in (cur.end_episode(False) for _ in range(5 * 4)) if d is not None]
    assert [d["decision"] for d in decisions] == ["easier"] * 4 and cur.below == 0
