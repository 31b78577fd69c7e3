"""Whether an absolute target's candidate differs from its base, towards the band.

The band validator asks only whether a candidate is *in* ``sr:L-H`` (or ``steps:L-H``). A
candidate identical to its base has the base's rate, so a base near the band (between the
validator's clearly-out point L - w and L, where it states no rate) passes validation and
confirmation often: at [0.4, 0.6] a base of 0.35 was accepted in 0.37 of the tasks of 5
rounds. So before an absolute target accepts, the candidate must also show that it moved
from its base in the band's direction (up when the base is below the band, down when above):

- **far base**: where the base's own first ``n`` observed episodes (the observe seeds the base
  check played from) all failed (all succeeded, for a base above the band), nothing more is
  asked. ``n = far_run(...)`` is the least run for which an identical candidate is then
  accepted with probability at most ``ALPHA_IDENTICAL`` per task whatever the base's true
  rate p: the run happens with (1 - p)^n, and the band validator accepts an identical
  candidate in some of R rounds with A_R(p) = 1 - (1 - P(in | p)^2)^R (exact, from the
  stopping table), so ``identical_bound`` = max over p of (1 - p)^n A_R(p) +
  min(``ALPHA_PAIRED``, (1 - (1 - p)^n) A_R(p)), on a 0.005 grid of p. The check's own 0/5
  is not enough (at [0.4, 0.6] a base of 0.35 shows it with 0.12 and then passes 5 rounds
  with 0.86), so a far base costs n - 5 more base episodes (3 at [0.4, 0.6], 8 at [0.3, 0.7]),
  played once per base, and only when a candidate is about to be accepted.
- **otherwise** (a base that showed an outcome on the band's side, or a mean-steps target):
  the base plays the seeds of the candidate's validation and confirmation episodes and the
  paired lift test (``stats.LiftTest``) reads the pairs in seed order: a pair counts for the
  candidate where its outcome moved from the base's towards the band, against it where it
  moved away (for step counts a sign test). The pairs are the candidate's validation and
  confirmation episodes, kept *because* they said "in", so given that a round reaches the
  test an identical candidate passes it far more often than its alpha (0.45 at [0.7, 1],
  p = 0.3); what is bounded is the joint chance of reaching and passing it, computed exactly
  from the stopping table in tests/test_differs_attack.py (at most 0.0041 against the
  ``ALPHA_PAIRED`` share in every band scanned). Episodes that errored, on either side, make
  no pair and end no far run; under a seed-driven policy the identical
  candidate plays each seed as the base does, no pair is discordant, and it never passes. Costs as many base episodes as the candidate's validation and confirmation played
  (up to 60 pairs; more of both where those do not decide), per candidate that gets there.

So per task, a candidate identical to its base is accepted with probability at most
``ALPHA_IDENTICAL`` = 0.05 for every absolute target (steps: <= ``ALPHA_PAIRED``); the
rate is per task, as the band validator's own ``R / 100`` for clearly-out candidates.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .stats import GRID, LIFT_LOOKS, design

ALPHA_IDENTICAL = 0.05  # per task: P(an absolute target accepts a candidate identical to its base)
# the paired test's share of it, split evenly over the run's rounds: at 5 rounds its boundary asks a
# seed-driven pair the same a - b >= 11 as 0.025 would, and the far run gets the rest (13 base episodes
# at the main job's [0.3, 0.7] instead of 15)
ALPHA_PAIRED = 0.015
FAR_RUN_MAX = 60  # a longer run is not worth playing: the paired test decides instead
# the paired test's lift D: at alpha <= 0.025 its boundary already asks a - b >= 8, more than 0.1 x 60,
# so D only ends the test early ("not") once a 90 % upper bound on the move is below it
FUTILITY_LIFT = 0.1

__all__ = ["ALPHA_IDENTICAL", "ALPHA_PAIRED", "FUTILITY_LIFT", "far_run", "identical_accepts", "identical_bound",
           "identical_curve", "looks", "paired_alpha", "sign_pairs"]


def paired_alpha(rounds: int) -> float:
    """The paired test's rate in each round of a task of ``rounds`` rounds (coevolved bases
    included: they share the rounds), so that the rounds together spend ``ALPHA_PAIRED``."""
    return ALPHA_PAIRED / max(1, int(rounds))


@functools.lru_cache(maxsize=64)
def identical_accepts(band: tuple[float, float], rounds: int, confirm: bool = True,
                      k_max: int | None = None) -> tuple[float, ...]:
    """A_R(p) on ``stats.GRID``: P(the band validator accepts, in some of ``rounds`` rounds, a
    candidate of true rate p), exact; with ``confirm`` an "in" must be said twice."""
    d = design((float(band[0]), float(band[1])), k_max)
    p_in = np.array([d.operating(float(p))[0]["in"] for p in GRID])
    per_round = p_in ** 2 if confirm else p_in
    return tuple(float(x) for x in 1 - (1 - per_round) ** max(1, int(rounds)))


def identical_curve(band: tuple[float, float], up: bool, run: int | None, rounds: int, confirm: bool = True,
                    k_max: int | None = None) -> np.ndarray:
    """On ``stats.GRID`` (the base's true rate): the bound on P(a task accepts a candidate
    identical to its base) when the paired test is skipped after a far run of ``run``
    (``None``: never skipped): P(run) A_R(p) + min(``ALPHA_PAIRED``, P(no run) A_R(p))."""
    accepts = np.asarray(identical_accepts(band, rounds, confirm, k_max))
    if run is None:
        skip = np.zeros_like(GRID)
    else:
        skip = (1 - GRID) ** run if up else GRID ** run
    return skip * accepts + np.minimum(ALPHA_PAIRED, (1 - skip) * accepts)


def identical_bound(band: tuple[float, float], up: bool, run: int | None, rounds: int, confirm: bool = True,
                    k_max: int | None = None) -> float:
    """The largest ``identical_curve`` over the base's true rate."""
    return float(np.max(identical_curve(band, up, run, rounds, confirm, k_max)))


@functools.lru_cache(maxsize=64)
def far_run(band: tuple[float, float], up: bool, rounds: int, confirm: bool = True,
            k_max: int | None = None) -> int | None:
    """The least n for which a base whose first n episodes all failed (``up``; all succeeded
    otherwise) needs no paired test, keeping ``identical_bound`` <= ``ALPHA_IDENTICAL``;
    ``None`` when no run up to ``FAR_RUN_MAX`` does."""
    for n in range(1, FAR_RUN_MAX + 1):
        if identical_bound(band, up, n, rounds, confirm, k_max) <= ALPHA_IDENTICAL:
            return n
    return None


def sign_pairs(base: Sequence[float], cand: Sequence[float], up: bool) -> list[tuple[float, float]]:
    """(base, candidate) outcomes on the same seeds as the lift test reads them: (0, 1) where
    the candidate's value moved towards the band, (1, 0) where it moved away, (0, 0) a tie.
    For success outcomes towards a band above, that is the pair itself ((1, 1) reads (0, 0),
    which the test counts alike); towards a band below, its complement."""
    out = []
    for b, c in zip(base, cand, strict=True):
        towards, away = (c > b, c < b) if up else (c < b, c > b)
        out.append((float(away), float(towards)))
    return out


def looks(played: int) -> tuple[int, ...]:
    """The lift test's looks when ``played`` pairs are at hand already: a look there, then the
    usual ones; the last stays at 60, so the boundary is the one calibrated for 60 (it holds
    at every count of discordant pairs, hence at looks chosen by the validation's stop)."""
    last = LIFT_LOOKS[-1]
    return tuple(sorted({min(max(1, int(played)), last), *(k for k in LIFT_LOOKS if k > played)}))
