"""The validator's stated operating characteristic, intervals, and target parsing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from envh import errors
from envh.rollout import wilson
from envh_rigger import stats
from envh_rigger.stats import SequentialValidator, design, fixed_decision
from envh_rigger.targets import parse_target


def test_one_wilson_interval_in_the_project():
    assert stats.wilson is wilson  # the rigger imports core's, it has none of its own
    lo, hi = wilson(2, 5)
    assert lo < 0.4 < hi and wilson(0, 0) == (0.0, 1.0)


def test_exact_characteristic_meets_the_stated_guarantee_at_the_default_band():
    c = design((0.4, 0.6)).characteristic
    assert c["centre"]["p_in"] >= 0.85
    assert c["out_below"]["p_in"] <= 0.10 and c["out_above"]["p_in"] <= 0.10
    assert c["p=0"]["rollouts"] <= 5 and c["p=1"]["rollouts"] <= 5


@pytest.mark.parametrize("band", [(0.2, 0.4), (0.6, 0.8), (0.3, 0.5), (0.7, 1.0), (0.0, 0.3), (0.45, 0.6)])
def test_the_guarantee_scales_to_other_bands(band):
    assert design(band).guaranteed, design(band).characteristic


def test_simulation_agrees_with_the_exact_lattice():
    """The stopping table driven through next_batch/decide (as the loop does) behaves as
    the exact computation says: batching never changes a decision."""
    rng = np.random.default_rng(7)
    v, band = SequentialValidator(), (0.4, 0.6)
    for p in (0.2, 0.5):
        runs = [v.run(lambda k, p=p: list(rng.random(k) < p), band) for _ in range(1500)]
        p_in = sum(d == "in" for d, _ in runs) / len(runs)
        exact = design(band).operating(p)[0]["in"]
        assert abs(p_in - exact) < 0.035, (p, p_in, exact)


def test_clear_cases_settle_early_and_decide_is_pure():
    v, band = SequentialValidator(), (0.4, 0.6)
    assert v.next_batch([], band) == 5  # nothing can stop before five outcomes
    assert v.decide([False] * 5, band) == ("below", True)
    assert v.decide([True] * 5, band) == ("above", True)
    assert v.next_batch([True, False] * 3, band) >= 1
    assert v.decide([True, False] * 15, band) == ("in", True)
    assert v.decide([True, False] * 15, band) == v.decide([True, False] * 15, band)


def test_a_k_max_cap_is_honoured():
    v, band = SequentialValidator(k_max=3), (0.4, 0.6)
    assert v.next_batch([], band) <= 3
    assert v.next_batch([True, False, True], band) == 0
    assert v.decide([True, False, True], band)[0] in ("in", "above")
    one = SequentialValidator(k_max=1)
    assert one.next_batch([], band) == 1 and one.next_batch([True], band) == 0


def test_default_beats_fixed_five_on_the_in_class():
    rng = np.random.default_rng(3)
    v, band = SequentialValidator(), (0.4, 0.6)
    ok_seq = sum(v.run(lambda k: list(rng.random(k) < 0.5), band)[0] == "in" for _ in range(400))
    ok_fix = sum(fixed_decision(list(rng.random(5) < 0.5), band) == "in" for _ in range(400))
    assert ok_seq > ok_fix + 60


COUNTS = {  # step counts the rule was not tuned on (normal outcomes): skewed, with ties
    "poisson": lambda rng, k, mu: list(1 + rng.poisson(mu - 1, k).astype(float)),
    "geometric": lambda rng, k, mu: [float(x) for x in rng.geometric(1 / mu, k)],  # sd ~ mean, skew 2
}


@pytest.mark.parametrize("family", sorted(COUNTS))
@pytest.mark.parametrize("mu,expect_in", [(5.0, True), (2.0, False), (8.0, False)])
def test_mean_steps_validator_on_skewed_step_counts(family, mu, expect_in):
    """The guarantee at band [4, 6]: P(in | centre) >= 0.85, P(in | an edge -/+ one width) <= 0.10."""
    rng = np.random.default_rng(11)
    v, band = SequentialValidator(), (4.0, 6.0)
    draws = []
    for _ in range(300):
        outcomes: list[float] = []
        while (more := v.next_batch(outcomes, band, binary=False)) > 0:
            outcomes += COUNTS[family](rng, more, mu)
        draws.append((v.decide(outcomes, band, binary=False), outcomes))
    p_in = sum(d == ("in", True) for d, _ in draws) / len(draws)
    assert (p_in >= 0.85) if expect_in else (p_in <= 0.10), p_in
    assert max(len(o) for _, o in draws) <= stats.REAL_K_MAX


def test_heavy_tailed_step_counts_are_refused_not_misjudged():
    """Lognormal counts (skewness ~ 6) need more rollouts than the cap for the mean's normal
    approximation: an "in" there is reported as not decisive (the loop rejects it), and a
    candidate two widths out is still rarely judged in."""
    rng = np.random.default_rng(5)
    v, band = SequentialValidator(), (4.0, 6.0)

    def judge(mu):
        outcomes: list[float] = []
        while (more := v.next_batch(outcomes, band, binary=False)) > 0:
            outcomes += list(rng.lognormal(np.log(mu) - 0.5, 1.0, more))
        return v.decide(outcomes, band, binary=False)

    centre = [judge(5.0) for _ in range(100)]
    assert any(d == ("in", False) for d in centre)  # refused: the stated rates would not hold
    assert sum(judge(8.0) == ("in", True) for _ in range(100)) <= 10


def test_mean_steps_of_a_deterministic_policy_still_decide():
    v = SequentialValidator()
    assert v.decide([5.0] * 3, (4, 6), binary=False)[1] is False  # too few to say anything yet
    assert v.next_batch([5.0] * 10, (4, 6), binary=False) == 10
    assert v.decide([5.0] * 20, (4, 6), binary=False) == ("in", True)
    assert v.next_batch([9.0] * 10, (4, 6), binary=False) == 0
    assert v.decide([9.0] * 10, (4, 6), binary=False) == ("above", True)


@pytest.mark.parametrize("text,band,direction", [
    ("sr:0.4-0.6", (0.4, 0.6), "scaffold"),
    ("steps:2-3", (2, 3), "scaffold"),
    ("beats-baseline:0.2", (0.3, 1.0), "scaffold"),
    ("beats-baseline:-0.05", (0.0, 0.05), "pressure"),
])
def test_targets_reduce_to_bands(text, band, direction):
    target = parse_target(text)
    baseline = {"success_rate": 0.1, "mean_steps": 6.0}
    assert target.band(baseline) == pytest.approx(band)
    assert target.direction(baseline) == direction
    assert parse_target(str(target)) == target


@pytest.mark.parametrize("bad", ["sr:0.6-0.4", "sr:1-2", "steps:x", "speed:3", "weakness:", "beats-baseline:",
                                 "sr:0.5-0.55"])
def test_bad_targets_say_what_is_valid(bad):
    with pytest.raises(errors.EnvhError, match="sr:LO-HI"):
        parse_target(bad)


@pytest.mark.parametrize("band", [(0.3, 0.5), (0.35, 0.45), (0.55, 0.65)])
def test_p_0_and_1_settle_in_five_wherever_the_guarantee_allows_it(band):
    """A run of five failures at the centre of [0.3, 0.5] is 8 % likely: deciding on it still
    leaves P(in | centre) >= 0.85 reachable, so p = 0 and p = 1 are settled in 5 rollouts
    (9-11 when the run rule was kept to bands where such a run is under 5 %)."""
    d = design(band)
    c = d.characteristic
    assert d.guaranteed, c
    assert c["p=0"]["rollouts"] <= 5 and c["p=1"]["rollouts"] <= 5, c
    rng = np.random.default_rng(11)
    v = SequentialValidator()
    for p in (0.0, 1.0):
        runs = [v.run(lambda k, p=p: list(rng.random(k) < p), band) for _ in range(20)]
        assert all(dec != "in" and len(outs) <= 5 for dec, outs in runs), (p, runs[0])


# -- the paired lift test of relative targets ------------------------------------------------

@pytest.mark.parametrize("delta", [0.0, 0.1, 0.2, 0.5])
@pytest.mark.parametrize("rnd", [1, 2, 4])
def test_a_no_better_candidate_passes_the_lift_test_at_most_alpha_at_every_base_rate(delta, rnd):
    """Exact on the lattice, over base rates 0..1 and candidates equal to or worse than the
    base: the bound holds whatever the nuisance rate (no point estimate enters it)."""
    from envh_rigger.stats import LiftTest, round_alpha

    test = LiftTest(delta=delta, alpha=round_alpha(rnd))
    worst = max(test.operating(p, p - gap)[0] for p in np.linspace(0, 1, 41) for gap in (0.0, 0.05, 0.2)
                if p - gap >= 0)
    assert worst <= test.alpha, worst
    assert sum(round_alpha(r) for r in range(1, 60)) <= 0.05


def test_the_lift_test_simulated_agrees_with_its_exact_figures_and_has_power():
    from envh_rigger.stats import LiftTest

    test = LiftTest(delta=0.2, alpha=0.025)
    rng = np.random.default_rng(3)
    for p_base, p_cand in ((0.3, 0.3), (0.2, 0.6), (0.1, 0.4)):
        exact, mean_n = test.operating(p_base, p_cand)
        sims, ns = [], []
        for _ in range(3000):
            pairs = []
            while (more := test.next_batch(pairs)) > 0:
                pairs += [(float(rng.random() < p_base), float(rng.random() < p_cand)) for _ in range(more)]
            sims.append(test.decide(pairs) == ("beats", True))
            ns.append(len(pairs))
        assert abs(np.mean(sims) - exact) < 4 * math.sqrt(max(exact * (1 - exact), 1e-4) / 3000) + 0.002
        assert abs(np.mean(ns) - mean_n) < 1.5
    assert test.operating(0.1, 0.5)[0] >= 0.95  # a lift of D + 0.2 from 0.1 is found
    assert test.operating(0.3, 0.6)[0] >= 0.7


def test_pairs_with_the_same_outcome_never_pass_and_an_early_clear_lift_stops_early():
    from envh_rigger.stats import LiftTest

    test = LiftTest(delta=0.0, alpha=0.025)
    same = [(1.0, 1.0), (0.0, 0.0)] * 30
    assert test.decide(same) == ("not", True)
    clear = [(0.0, 1.0)] * 10
    assert test.next_batch(clear) == 0 and test.decide(clear) == ("beats", True)
    assert test.next_batch([]) == 10 and test.next_batch(clear[:4]) == 6
    # a lift below the one asked for is not accepted however significant
    test = LiftTest(delta=0.5, alpha=0.025)
    modest = [(0.0, 1.0)] * 24 + [(0.0, 0.0)] * 36  # +0.4 over 60 pairs
    assert test.decide(modest)[0] == "not"
