"""Numbers behind the verdicts: the sequential validator and its operating characteristic.

A candidate is *in* its band [L, H] or *below* / *above* it. The validator plays rollouts
until a decision rule on the outcomes so far says stop, and states its error rates:

Success rates (binary outcomes). For a band of width w (at least 0.1) the guarantee is
stated at the band's centre c and at the clearly-out points L - w and H + w (clamped into
[0, 1]; a band touching 0 or 1 has one side only)::

    P(judged in | p = c)              >= 0.85
    P(judged in | p <= L-w or >= H+w) <= 0.10
    mean rollouts at p in {0, 1}      <= 5   (see below for where this one can hold)

At [0.4, 0.6] (exact, computed on the binomial lattice): P(in | 0.5) = 0.87, P(in | 0.2)
= P(in | 0.8) = 0.08, 5 rollouts at p = 0 and 1, 9.8 mean rollouts on the mixture
population of ``bench/validator_efficiency.py`` (fixed K=5: 0.63 and 0.26 with 5; a
curtailed fixed-20 design: 0.85, 0.08 with 10.7). The rule is
a Bayes-optimal stopping table over (rollouts, successes), built by backward induction on
a grid prior with a ramp loss (deciding a side is free at the band's edge and costs 1 at
``RAMP`` band widths past it; deciding *in* wrongly costs ``LAMBDA`` times that) and a
cost per rollout; five identical outcomes from the start decide at once. The knobs were
tuned on a different population (p ~ Beta(0.5, 0.5): minimum mean rollouts subject to
the guarantee at [0.4, 0.6]) than the benchmark reports. For any other band the cost is
lowered until the exact characteristic meets the guarantee, so it holds by construction
(``design(band).characteristic`` shows it). Settling p = 0 in 5 rollouts means deciding on
five failures, which happen at the centre with probability (1 - c)^5; where that exceeds
1 - 0.85 no rule can have both (at [0.2, 0.4] p = 0 takes 15 rollouts, at [0.7, 0.9] p = 1
takes 22). The run rule is tried wherever that chance is at most 15 % and kept when a table
then meets the other two lines (at [0.3, 0.5] and [0.35, 0.45]: 5); where none does
(e.g. [0.3, 0.4]: 13) it is used only where the run is under 5 % at the centre.

Mean steps (real values), for a band [L, H] of width w, stated at the centre and at
L - w and H + w like the binary one: P(judged in | centre) >= 0.85, P(judged in | an edge
-/+ one width) <= 0.10. The rule: after ``REAL_LOOK`` (10) rollouts a mean the Student-t
posterior (``scipy.stats.t``) puts past an edge with probability ``Q_OUT`` (0.99) is
decided at once; otherwise rollouts go on until n >= max(``REAL_N0`` (20),
(z s_n / (w/2))^2, (g_n / 0.2)^2), where s_n and g_n are the spread and skewness seen
so far (a Chow-Robbins rule: a tail that shows late raises n; the last term waits until
the mean's own skewness g/sqrt(n) is small), and the sample mean's region decides.
Tuned on normal outcomes; measured (``bench/validator_efficiency.py``, tests) on counts it
was not tuned on, at [4, 6]: shifted Poisson 0.98 at the centre, geometric (sd ~ mean,
skewness 2) 0.91 with about 72 rollouts, <= 0.06 at 2 and 8 for every family. Where the
needed n exceeds ``REAL_K_MAX`` (200) or ``k_max`` (heavy tails, e.g. lognormal counts of
skewness ~ 6, or a band narrow for the spread) the rates cannot hold: a side is still
reported, but an "in" is marked not decisive and the loop rejects it (widen the band).

Decisions are pure functions of the outcomes seen so far, so a resumed run reaches the
same decision from the same episodes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import attrs
import numpy as np
from envh.rollout import wilson
from scipy import stats

Decision = str  # "below" | "in" | "above"
DECISIONS: tuple[Decision, ...] = ("below", "in", "above")

# binary design knobs (tuned with bench/validator_efficiency.py --tune on p ~ Beta(0.5, 0.5))
COST = 0.003  # loss units per rollout at a band of width 0.2
LAMBDA = 0.275  # weight of a wrong "in" relative to a wrong side
RAMP = 0.25  # band widths over which a wrong decision's loss ramps from 0 to its weight
RUN = 5  # identical outcomes from the start decide at once
RUN_RARE = 0.05  # ... where such a run is at most this likely at the band's centre
MIN_WIDTH = 0.1  # narrower success-rate bands need hundreds of rollouts per verdict
GRID = np.linspace(0.0, 1.0, 201)
# real-valued knobs (tuned by simulation on normal outcomes, see the module docstring)
REAL_LOOK = 10  # first look: a mean this clearly past an edge (Q_OUT) is decided here
REAL_N0 = 20  # no other verdict on fewer: a skewed count's spread shows late
Q_OUT = 0.99
SKEW_OF_MEAN = 0.2  # the sample mean's skewness (g / sqrt(n)) at which its normal approximation is trusted
Z_IN = float(stats.t.ppf(1 - (1 - 0.85) / 2, REAL_LOOK - 1))  # t quantile for P(in | centre) >= 0.85
REAL_K_MAX = 200  # beyond this the band is too narrow for the spread: the verdict is not decisive
# guarantees (binary) the design is checked against
P_IN_CENTRE, P_IN_OUT, N_EXTREME = 0.85, 0.10, 5.0

__all__ = ["ALPHA_RIG", "DECISIONS", "BinaryDesign", "LiftTest", "SequentialValidator", "design",
           "fixed_decision", "lift_boundary", "mean_interval", "round_alpha", "true_class", "wilson"]


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of a mean; infinite when fewer than two values."""
    n = len(values)
    if n < 2:
        return -math.inf, math.inf
    arr = np.asarray(values, dtype=float)
    sem = float(arr.std(ddof=1)) / math.sqrt(n)
    if sem == 0:
        return float(arr.mean()), float(arr.mean())
    lo, hi = stats.t.interval(confidence, n - 1, loc=float(arr.mean()), scale=sem)
    return float(lo), float(hi)


def true_class(p: float, band: tuple[float, float]) -> Decision:
    return "below" if p < band[0] else "above" if p > band[1] else "in"


def fixed_decision(outcomes: Sequence[bool], band: tuple[float, float]) -> Decision:
    """The plain rule: the point estimate of a fixed batch against the band."""
    return true_class(sum(bool(o) for o in outcomes) / max(1, len(outcomes)), band)


def guarantee_points(band: tuple[float, float]) -> dict[str, float]:
    """Where the binary guarantee is stated: the centre and the clearly-out points."""
    lo, hi = band
    w = max(hi - lo, MIN_WIDTH)
    points = {"centre": (lo + hi) / 2}
    if lo > 0:
        points["out_below"] = max(0.0, lo - w)
    if hi < 1:
        points["out_above"] = min(1.0, hi + w)
    return points


@attrs.frozen(kw_only=True)
class BinaryDesign:
    """A stopping table for one band: ``table[n][s]`` is 0 (go on) or 1/2/3 (below/in/above)."""

    band: tuple[float, float]
    k_max: int
    cost: float
    lam: float = LAMBDA
    run_limit: float = RUN_RARE
    table: tuple[tuple[int, ...], ...]

    def decision(self, n: int, s: int) -> int:
        return self.table[min(n, self.k_max)][s] if n <= self.k_max else self.table[self.k_max][
            min(s, self.k_max)]

    def operating(self, p: float) -> tuple[dict[Decision, float], float]:
        """Exact P(decision | p) and expected rollouts, by propagating the lattice."""
        alive = np.array([1.0])
        out = np.zeros(4)
        mean_n = 0.0
        for n in range(self.k_max + 1):
            row = np.asarray(self.table[n])
            for k in (1, 2, 3):
                out[k] += alive[row == k].sum()
            alive = np.where(row == 0, alive, 0.0)
            if n == self.k_max:
                break
            mean_n += alive.sum()
            nxt = np.zeros(n + 2)
            nxt[:-1] += alive * (1 - p)
            nxt[1:] += alive * p
            alive = nxt
        return dict(zip(DECISIONS, (float(x) for x in out[1:]), strict=True)), float(mean_n)

    @property
    def characteristic(self) -> dict[str, dict[str, float]]:
        """P(in) and mean rollouts at the guarantee points and at p = 0 and 1."""
        pts = {**guarantee_points(self.band), "p=0": 0.0, "p=1": 1.0}
        out = {}
        for name, p in pts.items():
            probs, n = self.operating(p)
            out[name] = {"p": p, "p_in": round(probs["in"], 4), "rollouts": round(n, 3)}
        return out

    @property
    def guaranteed(self) -> bool:
        c = self.characteristic
        outs = [v["p_in"] for k, v in c.items() if k.startswith("out_")]
        fail_run, win_run = _runs(self.band, self.run_limit)
        return (c["centre"]["p_in"] >= P_IN_CENTRE and all(x <= P_IN_OUT for x in outs)
                and (not fail_run or c["p=0"]["rollouts"] <= N_EXTREME)
                and (not win_run or c["p=1"]["rollouts"] <= N_EXTREME))


def _runs(band: tuple[float, float], limit: float = 0.05) -> tuple[bool, bool]:
    """Whether a run of RUN failures (successes) may decide: only where such a run is rare
    at the band's centre (<= ``limit``), so the shortcut costs the guarantee little."""
    c = (band[0] + band[1]) / 2
    return (1 - c) ** RUN <= limit, c ** RUN <= limit


def _losses(band: tuple[float, float], lam: float) -> np.ndarray:
    lo, hi = band
    z = RAMP * min(max(hi - lo, MIN_WIDTH), 0.2)  # a wide band keeps the tuned band's ramp
    below = np.clip((GRID - lo) / z, 0, 1)
    above = np.clip((hi - GRID) / z, 0, 1)
    inside = lam * np.clip(np.maximum(lo - GRID, GRID - hi) / z, 0, 1)
    loss = np.vstack([below, inside, above])
    if lo <= 0:
        loss[0] = np.inf  # nothing is below a band starting at 0
    if hi >= 1:
        loss[2] = np.inf
    return loss


def _table(band: tuple[float, float], cost: float, lam: float, k_max: int,
           run_limit: float = RUN_RARE) -> tuple[tuple[int, ...], ...]:
    """Backward induction over (n, s) with a uniform grid prior."""
    loss = _losses(band, lam)
    fail_run, win_run = _runs(band, run_limit)
    log_p = np.log(np.clip(GRID, 1e-300, 1))
    log_q = np.log(np.clip(1 - GRID, 1e-300, 1))
    rows: list[tuple[int, ...]] = [()] * (k_max + 1)
    value = np.zeros(0)
    for n in range(k_max, -1, -1):
        s = np.arange(n + 1)[:, None]
        loglik = np.where(s > 0, s * log_p, 0.0) + np.where(n - s > 0, (n - s) * log_q, 0.0)
        post = np.exp(loglik - loglik.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            terminal = post @ np.where(np.isinf(loss), 1e9, loss).T
        best, choice = terminal.min(axis=1), terminal.argmin(axis=1) + 1
        if n == k_max:
            decision, value = choice, best
        else:
            mean = post @ GRID
            cont = cost + mean * value[1:] + (1 - mean) * value[:-1]
            decision = np.where(cont < best, 0, choice)
            value = np.minimum(cont, best)
            if n >= RUN and fail_run:  # a run of identical outcomes decides
                decision[0], value[0] = choice[0], best[0]
            if n >= RUN and win_run:
                decision[-1], value[-1] = choice[-1], best[-1]
        rows[n] = tuple(int(x) for x in decision)
    return tuple(rows)


@functools.lru_cache(maxsize=64)
def design(band: tuple[float, float], k_max: int | None = None) -> BinaryDesign:
    """The stopping table for ``band``: the tuned cost, lowered until the guarantee holds.

    ``k_max`` caps the rollouts (the guarantee may then not hold: ``guaranteed`` says).
    """
    lo, hi = float(band[0]), float(band[1])
    w = max(hi - lo, MIN_WIDTH)
    auto = min(400, max(30, math.ceil(round(30 * (0.2 / w) ** 2, 6))))
    n_max = auto if k_max is None else max(1, int(k_max))
    best = None
    # a run of RUN identical outcomes may decide wherever it is rarer than 1 - P_IN_CENTRE at
    # the centre (so p = 0 / 1 can still be settled in 5); only when no table then meets the
    # guarantee is the shortcut kept to where it is rare (RUN_RARE)
    limits = (1 - P_IN_CENTRE, RUN_RARE) if any(_runs((lo, hi), 1 - P_IN_CENTRE)) else (RUN_RARE,)
    for limit in limits:
        # the tuned knobs first; then weigh a wrong "in" more (less, under the run rule: the
        # runs at p = 0 / 1 already take their share of the centre's acceptance)
        lams = (LAMBDA, 0.2) if limit > RUN_RARE else (LAMBDA, 0.5, 1.0, 2.0)
        for lam in lams:
            cost = COST
            for _ in range(6):
                best = BinaryDesign(band=(lo, hi), k_max=n_max, cost=cost, lam=lam, run_limit=limit,
                                    table=_table((lo, hi), cost, lam, n_max, limit))
                if best.guaranteed:
                    return best
                cost /= 2
    assert best is not None
    return best


@attrs.frozen(kw_only=True)
class SequentialValidator:
    """Rollouts until the decision rule stops (see the module docstring for its error rates).

    ``next_batch(values, band)`` says how many more rollouts to play (0: decide now): as
    many as certainly cannot change the decision, so a worker pool plays them together
    without changing the characteristic. ``decide(values, band)`` gives the decision and
    whether the rule stopped (``False`` only when asked before it did). ``k_max`` caps
    the rollouts (``None``: the band's design picks it, 30 at width 0.2).
    """

    k_max: int | None = None

    def _binary(self, band: tuple[float, float]) -> BinaryDesign:
        return design((float(band[0]), float(band[1])), self.k_max)

    def next_batch(self, values: Sequence[float], band: tuple[float, float], *, binary: bool = True) -> int:
        """How many more rollouts to run (0: decide now)."""
        n = len(values)
        if not binary:
            return _real_next(values, band, self.k_max or REAL_K_MAX)
        d = self._binary(band)
        s = int(sum(bool(v) for v in values))
        if n >= d.k_max or d.decision(n, s):
            return 0
        for extra in range(1, d.k_max - n + 1):  # earliest n at which some outcome stops
            row = d.table[n + extra]
            if any(row[s + j] for j in range(extra + 1)):
                return extra
        return d.k_max - n

    def decide(self, values: Sequence[float], band: tuple[float, float], *,
               binary: bool = True) -> tuple[Decision, bool]:
        """The decision and whether the stopping rule reached it."""
        n = len(values)
        if not binary:
            return _real_decide(values, band, self.k_max or REAL_K_MAX)
        d = self._binary(band)
        s = int(sum(bool(v) for v in values))
        code = d.decision(n, s)
        if code:
            return DECISIONS[code - 1], True
        return fixed_decision([bool(v) for v in values], band) if n else "in", False

    def confidence(self, values: Sequence[float], band: tuple[float, float], *,
                   binary: bool = True) -> dict[Decision, float]:
        """Posterior mass below / in / above the band (uniform prior; t posterior for means)."""
        n = len(values)
        lo, hi = band
        if binary:
            s = int(sum(bool(v) for v in values))
            post = stats.beta(1 + s, 1 + n - s)
            below, above = float(post.cdf(lo)), float(post.sf(hi))
        elif n < 2:
            return {"below": 1 / 3, "in": 1 / 3, "above": 1 / 3}
        else:
            post = _t_posterior(values, band)
            below, above = float(post.cdf(lo)), float(post.sf(hi))
        return {"below": below, "in": max(0.0, 1 - below - above), "above": above}

    def design_for(self, band: tuple[float, float]) -> BinaryDesign:
        """The stopping table used at ``band`` (``operating(p)`` gives P(decision | p))."""
        return self._binary(band)

    def characteristic(self, band: tuple[float, float]) -> dict[str, dict[str, float]]:
        """The exact binary operating characteristic at ``band``'s guarantee points."""
        return self._binary(band).characteristic

    def run(self, sample: Callable[[int], list[bool]], band: tuple[float, float], *,
            binary: bool = True) -> tuple[Decision, list[float]]:
        """Drive ``sample(n) -> outcomes`` to a decision (used by the benchmark and tests)."""
        outcomes: list[float] = []
        while (more := self.next_batch(outcomes, band, binary=binary)) > 0:
            outcomes += sample(more)
        return self.decide(outcomes, band, binary=binary)[0], outcomes


def _t_posterior(values: Sequence[float], band: tuple[float, float]) -> stats.rv_continuous:
    arr = np.asarray(values, dtype=float)
    n = len(arr)
    # identical values (a deterministic policy) still leave doubt about the mean: floor the sd
    sd = max(float(arr.std(ddof=1)), 0.1 * max(band[1] - band[0], 1e-6))
    return stats.t(n - 1, loc=float(arr.mean()), scale=sd / math.sqrt(n))


def _early_out(values: Sequence[float], band: tuple[float, float]) -> Decision | None:
    post = _t_posterior(values, band)
    if post.cdf(band[0]) >= Q_OUT:
        return "below"
    if post.sf(band[1]) >= Q_OUT:
        return "above"
    return None


def real_sample_size(values: Sequence[float], band: tuple[float, float]) -> int:
    """Rollouts needed so that the sample mean of a candidate at the band's centre lands
    inside with probability >= 0.85, from the spread seen so far (Chow-Robbins: the rule
    stops at the first n with n >= (z s_n / (w/2))^2, so a tail that shows late raises it).
    Uncapped: more than ``REAL_K_MAX`` means the band is too narrow for that spread."""
    w = max(band[1] - band[0], 1e-6)
    arr = np.asarray(values, dtype=float)
    sd = max(float(np.std(arr, ddof=1)), 0.1 * w)
    # the mean of skewed counts is itself skewed (by g / sqrt(n)): wait until that is small
    g = float(stats.skew(arr, bias=False)) if len(arr) > 2 and np.ptp(arr) > 0 else 0.0
    return max(REAL_N0, math.ceil((Z_IN * sd / (w / 2)) ** 2), math.ceil((g / SKEW_OF_MEAN) ** 2))


def _real_next(values: Sequence[float], band: tuple[float, float], cap: int) -> int:
    n = len(values)
    if n >= cap:
        return 0
    if n < REAL_LOOK:
        return min(REAL_LOOK, cap) - n
    if _early_out(values, band) is not None:
        return 0
    need = min(real_sample_size(values, band), cap)
    # at most doubling per look: the spread is re-estimated before committing to more
    return max(0, min(need, 2 * n) - n)


def _real_decide(values: Sequence[float], band: tuple[float, float], cap: int) -> tuple[Decision, bool]:
    n = len(values)
    mean = float(np.mean(values)) if n else (band[0] + band[1]) / 2
    if n < REAL_LOOK:
        return true_class(mean, band), False
    early = _early_out(values, band)
    if early is not None:
        return early, True
    need = real_sample_size(values, band)
    decision = true_class(mean, band)
    # past the cap the stated rates do not hold: a side is still safe to report, "in" is not
    return decision, n >= min(need, cap) and (need <= cap or decision != "in")


# -- relative targets: a paired two-sample sequential test --------------------------------
#
# ``beats-baseline:D`` and ``weakness:...`` compare a candidate with its base, so a band
# around the base's 5-rollout estimate (what they once were) accepts a candidate identical
# to the base about a third of the time. Instead base and candidate play the same episode
# seeds, in pairs, and the pairs decide. With a = pairs where only the candidate scores and
# b = pairs where only the base scores, the lift p_cand - p_base equals P(a) - P(b) for any
# dependence between the two (an identical candidate has P(a) = P(b) by symmetry). Given
# the m = a + b discordant pairs, a ~ Bin(m, q) with q <= 1/2 whenever the candidate is no
# better: the walk S = a - b is a fair (or downward) coin walk, whatever the base's rate.
# The test accepts at a look when S >= ceil(C sqrt(m)) (a repeated-significance boundary
# calibrated exactly on the fair walk, checked at every m, so any look schedule keeps it)
# *and* the observed lift S / n is at least D. So
#
#     P(accept | candidate no better than its base) <= alpha   (exact, no nuisance rate)
#
# and a rig over T tasks spends alpha_rig = 0.05 as alpha_r = alpha_rig / T / 2^r (round r =
# 1, 2, ...), so the chance that the rig accepts *any* candidate no better than its base, on
# any task, is at most 0.05, however many rounds run. Power depends on the pair distribution;
# ``LiftTest.operating(p_base, p_cand)`` gives it exactly for independent outcomes (the
# least favourable case for a positively correlated pair), and the report prints it.

ALPHA_RIG = 0.05  # family-wise: P(a task accepts any candidate no better than its base)
LIFT_LOOKS = (10, 20, 30, 45, 60)  # pairs at which the lift test looks
FUTILITY_Z = 1.2816  # stop early when a one-sided 90 % upper bound on the lift is below D


def round_alpha(rnd: int, alpha: float = ALPHA_RIG, tasks: int = 1) -> float:
    """Round ``rnd``'s share of the rig's family-wise rate: ``alpha`` split evenly over the
    rig's ``tasks``, then halved each round (sums to ``alpha`` over every task and round)."""
    return alpha / max(1, int(tasks)) / 2 ** max(1, int(rnd))


@functools.lru_cache(maxsize=64)
def lift_boundary(alpha: float, m_max: int) -> float:
    """Smallest C (to 1e-4) with P(S_m >= ceil(C sqrt(m)) for some m <= m_max) <= alpha on a
    fair +-1 walk, computed exactly."""

    def crossing(c: float) -> float:
        bound = [math.ceil(c * math.sqrt(m) - 1e-12) for m in range(m_max + 1)]
        alive = np.zeros(2 * m_max + 1)  # position + m_max
        alive[m_max] = 1.0
        pos = np.arange(-m_max, m_max + 1)
        crossed = 0.0
        for m in range(1, m_max + 1):
            alive = 0.5 * (np.roll(alive, 1) + np.roll(alive, -1))
            hit = pos >= bound[m]
            crossed += float(alive[hit].sum())
            alive[hit] = 0.0
        return crossed

    lo, hi = 0.5, 8.0
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if crossing(mid) > alpha else (lo, mid)
    return hi


@attrs.frozen(kw_only=True)
class LiftTest:
    """Whether a candidate beats its base by at least ``delta`` (see the comment above).

    ``pairs`` are (base outcome, candidate outcome) on the same episode seed, in seed order.
    ``next_batch(n)`` says how many more pairs to play (0: decide now); ``decide(pairs)``
    gives ``"beats"`` or ``"not"`` and whether the rule stopped.
    """

    delta: float
    alpha: float
    looks: tuple[int, ...] = LIFT_LOOKS

    @property
    def c(self) -> float:
        return lift_boundary(self.alpha, self.looks[-1])

    def next_batch(self, pairs: Sequence[tuple[float, float]]) -> int:
        n = len(pairs)
        if n and self._stop(pairs) is not None:
            return 0
        later = [k for k in self.looks if k > n]
        return later[0] - n if later else 0

    def _stop(self, pairs: Sequence[tuple[float, float]]) -> str | None:
        n = len(pairs)
        a = sum(1 for b, c in pairs if c and not b)
        b = sum(1 for b, c in pairs if b and not c)
        return self._rule(n, a, b)

    def _rule(self, n: int, a: int, b: int) -> str | None:
        """At a look of ``n`` pairs: "beats", "not" or None (go on)."""
        if n not in self.looks and n < self.looks[-1]:
            return None
        s, m = a - b, a + b
        if m and s >= math.ceil(self.c * math.sqrt(m) - 1e-12) and s >= self.delta * n - 1e-9:
            return "beats"
        if n >= self.looks[-1]:
            return "not"
        var = max(m / n - (s / n) ** 2, 0.0)
        if s / n + FUTILITY_Z * math.sqrt(max(var, 1.0 / n) / n) < self.delta:
            return "not"
        return None

    def decide(self, pairs: Sequence[tuple[float, float]]) -> tuple[str, bool]:
        rule = self._stop(pairs) if pairs else None
        if rule is not None:
            return rule, True
        return "not", False

    def operating(self, p_base: float, p_cand: float) -> tuple[float, float]:
        """Exact P(beats) and mean pairs played when base and candidate succeed independently
        with these rates (a positively correlated pair has fewer discordant pairs: the
        no-better rate stays <= alpha, power is higher)."""
        p01, p10 = (1 - p_base) * p_cand, p_base * (1 - p_cand)
        p00 = 1 - p01 - p10
        n_max = self.looks[-1]
        alive = np.zeros((1, 1))
        alive[0, 0] = 1.0  # alive[a, b]
        beats, mean_n = 0.0, 0.0
        for n in range(1, n_max + 1):
            mean_n += float(alive.sum())
            nxt = np.zeros((n + 1, n + 1))
            nxt[:-1, :-1] += alive * p00
            nxt[1:, :-1] += alive * p01
            nxt[:-1, 1:] += alive * p10
            alive = nxt
            if n in self.looks:
                for a in range(n + 1):
                    for b in range(n + 1 - a):
                        if alive[a, b] == 0.0:
                            continue
                        rule = self._rule(n, a, b)
                        if rule == "beats":
                            beats += float(alive[a, b])
                        if rule is not None:
                            alive[a, b] = 0.0
        return beats, mean_n

    def characteristic(self, p_base: float, *, lower: bool = False) -> dict[str, dict[str, float]]:
        """P(beats) and mean pairs at a base rate: no lift, half the lift D (between "no
        better" and D nothing is promised), D, D + 0.1 and D + 0.2. ``lower``: the target
        asks for that much *below* the base (the test runs on complements; rates are given
        as the metric's own)."""
        out = {}
        q_base = 1 - p_base if lower else p_base
        for name, lift in (("no lift", 0.0), ("lift D/2", self.delta / 2), ("lift D", self.delta),
                           ("lift D+0.1", self.delta + 0.1), ("lift D+0.2", self.delta + 0.2)):
            q_cand = min(1.0, max(0.0, q_base + lift))
            if name != "no lift" and (q_cand - q_base < lift - 1e-9 or lift <= 0):
                continue  # out of reach from this base rate
            prob, n = self.operating(q_base, q_cand)
            p_cand = 1 - q_cand if lower else q_cand
            out[name] = {"p_base": round(p_base, 4), "p_cand": round(p_cand, 4), "p_beats": round(prob, 4),
                         "pairs": round(n, 2)}
        return out
