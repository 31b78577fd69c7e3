"""Numbers behind the verdicts: confidence intervals and the sequential validator.

Validation is numeric, never a model's opinion. Reports carry a Wilson score interval
(success rates) or a normal interval (mean steps). The sequential validator uses the
Beta posterior of the success rate: it adds rollouts only while no region (below, in,
above the band) is probable enough, i.e. while the credible interval straddles a band
edge, up to ``k_max``. It is a pure function of the outcomes seen so far, so a resumed
run reaches the same decision from the same episodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import attrs

Decision = str  # "below" | "in" | "above"


def z_for(confidence: float) -> float:
    """Two-sided normal quantile for ``confidence`` (0.9 → 1.645)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = 0.9) -> tuple[float, float]:
    """Wilson score interval of a success rate; ``(0, 1)`` when there is no data."""
    if n <= 0:
        return 0.0, 1.0
    z = z_for(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: Sequence[float], confidence: float = 0.9) -> tuple[float, float]:
    """Normal interval of a mean; infinite when fewer than two values."""
    n = len(values)
    if n < 2:
        return -math.inf, math.inf
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z_for(confidence) * math.sqrt(var / n)
    return mean - half, mean + half


def beta_cdf(x: float, a: int, b: int) -> float:
    """CDF of Beta(a, b) at ``x`` for integer a, b: P(Binomial(a+b-1, x) >= a)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    n = a + b - 1
    return sum(math.comb(n, j) * x ** j * (1 - x) ** (n - j) for j in range(a, n + 1))


def region_probs(values: Sequence[float], band: tuple[float, float], *, binary: bool) -> dict[Decision, float]:
    """Posterior mass below, in and above ``band``.

    Binary outcomes: Beta(1 + successes, 1 + failures) (uniform prior). Real values: a
    normal posterior of the mean; with fewer than two values the mass is spread evenly.
    """
    n = len(values)
    if binary:
        s = int(sum(bool(v) for v in values))
        below = beta_cdf(band[0], 1 + s, 1 + n - s)
        above = 1 - beta_cdf(band[1], 1 + s, 1 + n - s)
    elif n < 2:
        return {"below": 1 / 3, "in": 1 / 3, "above": 1 / 3}
    else:
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) or 0.5
        dist = NormalDist(mean, sd / math.sqrt(n))
        below, above = dist.cdf(band[0]), 1 - dist.cdf(band[1])
    return {"below": below, "in": max(0.0, 1 - below - above), "above": above}


@attrs.frozen(kw_only=True)
class SequentialValidator:
    """Validate with ``k_first`` rollouts, then ``k_step`` more at a time until one
    region (below / in / above the band) holds posterior mass ``>= threshold``, or
    ``k_max`` rollouts are used; the decision is the confident region, else the region
    of the sample mean.

    Rollouts go where they change a decision: a policy that fails (or wins) every time
    is settled after the first batch, one near a band edge gets more.
    """

    k_first: int = 2
    k_step: int = 1
    k_max: int = 10
    threshold: float = 0.65  # tuned with bench/validator_efficiency.py on two task populations

    def next_batch(self, values: Sequence[float], band: tuple[float, float], *, binary: bool = True) -> int:
        """How many more rollouts to run (0: decide now)."""
        n = len(values)
        if n < self.k_first:
            return self.k_first - n
        if n >= self.k_max or self.decide(values, band, binary=binary)[1]:
            return 0
        return min(self.k_step, self.k_max - n)

    def decide(self, values: Sequence[float], band: tuple[float, float], *,
               binary: bool = True) -> tuple[Decision, bool]:
        """The most probable region and whether its posterior mass reaches the threshold.

        Short of the threshold (the budget ran out near an edge), the region of the
        sample mean decides, as a fixed-K validator would: with the band's edges inside
        the band, 6 of 10 in [0.4, 0.6] is in, however the posterior leans.
        """
        probs = region_probs(values, band, binary=binary)
        decision = max(probs, key=lambda k: probs[k])
        if probs[decision] >= self.threshold:
            return decision, True
        if values:
            decision = true_class(sum(float(v) for v in values) / len(values), band)
        return decision, False

    def run(self, sample: object, band: tuple[float, float]) -> tuple[Decision, list[bool]]:
        """Drive ``sample(n) -> list[bool]`` to a decision (used by the benchmark)."""
        outcomes: list[bool] = []
        while (more := self.next_batch(outcomes, band)) > 0:
            outcomes += sample(more)  # type: ignore[operator]
        return self.decide(outcomes, band)[0], outcomes


def fixed_decision(outcomes: Sequence[bool], band: tuple[float, float]) -> Decision:
    """The plain rule: the point estimate of a fixed batch against the band."""
    return true_class(sum(bool(o) for o in outcomes) / max(1, len(outcomes)), band)


def true_class(p: float, band: tuple[float, float]) -> Decision:
    return "below" if p < band[0] else "above" if p > band[1] else "in"
