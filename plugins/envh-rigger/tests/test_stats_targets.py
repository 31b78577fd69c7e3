"""Intervals, the sequential validator and target parsing."""

from __future__ import annotations

import random

import pytest
from envh import errors
from envh_rigger.stats import SequentialValidator, beta_cdf, fixed_decision, region_probs, wilson
from envh_rigger.targets import parse_target


def test_wilson_contains_the_rate_and_narrows():
    lo5, hi5 = wilson(2, 5)
    lo50, hi50 = wilson(20, 50)
    assert lo5 < 0.4 < hi5 and lo50 < 0.4 < hi50
    assert hi50 - lo50 < hi5 - lo5
    assert wilson(0, 0) == (0.0, 1.0)


def test_beta_cdf_matches_closed_forms():
    assert beta_cdf(0.3, 1, 1) == pytest.approx(0.3)
    assert beta_cdf(0.5, 2, 1) == pytest.approx(0.25)  # Beta(2,1): x^2
    assert beta_cdf(0.5, 1, 2) == pytest.approx(0.75)  # Beta(1,2): 1-(1-x)^2


def test_validator_settles_clear_cases_early_and_extends_near_edges():
    v = SequentialValidator()
    band = (0.4, 0.6)
    assert v.next_batch([], band) == 2
    assert v.decide([False, False], band) == ("below", True)  # P(p < 0.4) = 0.78
    assert v.next_batch([False, False], band) == 0
    assert v.next_batch([True, False], band) == 1  # one of each says nothing yet
    near = [True, False] * 2
    assert v.next_batch(near, band) == 1
    assert v.next_batch([True, False] * 5, band) == 0  # k_max reached
    assert v.decide([True, False] * 5, band)[0] == "in"


def test_sequential_beats_fixed_five_on_a_bimodal_population():
    rng = random.Random(3)
    v, band = SequentialValidator(), (0.4, 0.6)
    seq_err = fix_err = used = 0
    for _ in range(2000):
        p = rng.betavariate(0.5, 0.5)
        truth = "below" if p < 0.4 else "above" if p > 0.6 else "in"
        decision, outs = v.run(lambda k: [rng.random() < p for _ in range(k)], band)
        used += len(outs)
        seq_err += decision != truth
        fix_err += fixed_decision([rng.random() < p for _ in range(5)], band) != truth
    assert used / 2000 <= 0.75 * 5
    assert seq_err <= fix_err


def test_region_probs_for_means():
    probs = region_probs([30, 31, 29, 30], (25, 35), binary=False)
    assert probs["in"] > 0.99
    assert region_probs([3], (25, 35), binary=False)["in"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("text,band,direction", [
    ("sr:0.4-0.6", (0.4, 0.6), "scaffold"),
    ("steps:2-3", (2, 3), "scaffold"),
    ("beats-baseline:0.2", (0.3, 1.0), "scaffold"),
    ("beats-baseline:-0.05", (0.0, 0.05), "pressure"),
    ('weakness:"stops too early"', (1e-9, 0.1 - 1e-9), "pressure"),
])
def test_targets_reduce_to_bands(text, band, direction):
    target = parse_target(text)
    baseline = {"success_rate": 0.1 if "weakness" not in text else 0.3, "mean_steps": 6.0}
    if "weakness" in text:
        assert target.band(baseline)[1] == pytest.approx(0.1)
    else:
        assert target.band(baseline) == pytest.approx(band)
    assert target.direction(baseline) == direction
    assert parse_target(str(target)) == target


@pytest.mark.parametrize("bad", ["sr:0.6-0.4", "sr:1-2", "steps:x", "speed:3", "weakness:", "beats-baseline:"])
def test_bad_targets_say_what_is_valid(bad):
    with pytest.raises(errors.EnvhError, match="sr:LO-HI"):
        parse_target(bad)
