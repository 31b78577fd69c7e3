"""An absolute target's candidate must differ from its base towards the band (``differs.py``).

Exact figures come from the band validator's stopping table; the loop-level tests use the
seed-driven ``rate`` policy, so every run is repeatable whatever the test order.
"""

from __future__ import annotations

import numpy as np
import pytest
from envh.rollout import TrajectoryStore
from envh_rigger import differs
from envh_rigger.journal import Journal
from envh_rigger.pool import HarnessPool
from envh_rigger.run import RigConfig, rig
from envh_rigger.stats import GRID, LiftTest, SequentialValidator, design

TASK = "medium/1,2,6,6"
KEY = f"toy24/{TASK}"
BANDS = [(0.4, 0.6), (0.3, 0.7), (0.7, 1.0), (0.0, 0.3), (0.2, 0.4), (0.45, 0.55)]



def _rig(registry, tmp_path, name, **kw):
    cfg = RigConfig(spec={"bridge": "toy24"}, tasks=TASK, out=str(tmp_path / name), max_steps=40, workers=1, **kw)
    return rig(cfg, registry=registry)


def _differs(out):
    return [(e["attempt"], e["attempt"]["result"]["differs"]) for e in Journal(out).events(kind="attempt")
            if (e["attempt"].get("result") or {}).get("differs")]


@pytest.mark.parametrize("band", BANDS)
def test_the_stated_bound_on_an_identical_candidate_is_at_most_five_percent_per_task(band):
    """Exact: with the far run the rule picks (or none), the bound on P(a task of 5 rounds
    accepts a candidate identical to its base) is <= 0.05 at every base rate."""
    for up in (True, False):
        if (band[0] <= 0) if up else (band[1] >= 1):
            continue  # no base lies on that side
        run = differs.far_run(band, up, 5)
        assert differs.identical_bound(band, up, run, 5) <= differs.ALPHA_IDENTICAL
        assert differs.identical_bound(band, up, None, 5) <= differs.ALPHA_PAIRED + 1e-12


@pytest.mark.parametrize(("band", "least"), [((0.4, 0.6), 0.1), ((0.3, 0.7), 0.2)])
def test_five_observed_failures_do_not_make_a_base_far(band, least):
    """Why a far base costs episodes: skipping the paired test on the check's 0/5 alone would
    accept an identical candidate in more than ``least`` of the tasks at some base rate
    (at [0.4, 0.6]: a base of 0.35 shows 0/5 with 0.12 and then passes 5 rounds with 0.86)."""
    assert differs.identical_bound(band, True, 5, 5) > least
    assert differs.far_run(band, True, 5) > 5


def test_the_band_acceptance_behind_the_bound_is_the_validators():
    """A_R(p), computed on the stopping table, against validation + confirmation played by the
    validator itself over 3,000 simulated tasks of 5 rounds at p = 0.35, band [0.4, 0.6]."""
    band, p, rounds = (0.4, 0.6), 0.35, 5
    rng = np.random.default_rng(7)
    validator = SequentialValidator()

    def task() -> bool:
        for _ in range(rounds):
            if all(validator.run(lambda k: list(rng.random(k) < p), band)[0] == "in" for _ in range(2)):
                return True
        return False

    exact = float(np.interp(p, GRID, differs.identical_accepts(band, rounds)))
    p_in = design(band).operating(p)[0]["in"]
    assert exact == pytest.approx(1 - (1 - p_in ** 2) ** rounds, abs=1e-9)
    simulated = float(np.mean([task() for _ in range(3000)]))
    assert abs(simulated - exact) < 4 * np.sqrt(exact * (1 - exact) / 3000), (simulated, exact)


@pytest.mark.parametrize(("band", "p"), [((0.4, 0.6), 0.3), ((0.4, 0.6), 0.35), ((0.4, 0.6), 0.65),
                                         ((0.3, 0.7), 0.2), ((0.7, 1.0), 0.6)])
def test_an_identical_candidate_near_the_band_is_accepted_in_at_most_five_percent_of_tasks(band, p, bench):
    """Simulated over 2,000 tasks of 5 rounds with independent pairs (the least favourable case
    for the paired test; a seed-driven policy never passes it), by the bench's model of the
    loop's rule: near the band the band validator alone accepted 0.3-0.4 of these tasks."""
    rng = np.random.default_rng(11)
    validator = SequentialValidator()

    def draw(k: int) -> list[bool]:
        return list(rng.random(k) < p)

    got = [bench.identical_task(draw, band, rng, validator, seeded=False)[0] for _ in range(2000)]
    before = [bench.absolute_accepts(draw, band, rng, validator) for _ in range(500)]
    assert np.mean(got) <= differs.ALPHA_IDENTICAL, np.mean(got)
    assert np.mean(before) > 0.1, "not a point near the band: the rule before it already rejected"


def test_sign_pairs_read_a_move_towards_the_band_as_the_candidates_win():
    assert differs.sign_pairs([0, 1, 0, 1], [1, 0, 0, 1], up=True) == [(0, 1), (1, 0), (0, 0), (0, 0)]
    assert differs.sign_pairs([0, 1], [1, 0], up=False) == [(1, 0), (0, 1)]
    assert differs.sign_pairs([10.0, 10.0, 7.0], [7.0, 12.0, 7.0], up=False) == [(0, 1), (1, 0), (0, 0)]
    # looks: one where the validation and confirmation left off, then the lift test's own; 60 stays last
    assert differs.looks(27) == (27, 30, 45, 60)
    assert differs.looks(75) == (60,)
    test = LiftTest(delta=differs.FUTILITY_LIFT, alpha=differs.paired_alpha(5), looks=differs.looks(27))
    assert test.c == LiftTest(delta=0.0, alpha=differs.paired_alpha(5)).c  # the boundary calibrated for 60


def test_a_candidate_that_moves_a_near_base_into_the_band_is_accepted(registry, tmp_path):
    """Power: a base of true rate 0.3 (near [0.4, 0.6]: its first 8 episodes do not all fail)
    and a stage leaving three numbers, where the policy wins with 0.55 on the same seeds as
    the base and more: the paired test sees only pairs moving towards the band and accepts."""
    rates = {4: 0.3, 3: 0.55, 2: 0.95}
    for seed in (0, 2):
        summary = _rig(registry, tmp_path, f"move{seed}", policy="rate", policy_options={"rates": rates},
                       target="sr:0.4-0.6", seed=seed)
        assert summary["stops"][KEY] == "accepted", summary
        checked = _differs(tmp_path / f"move{seed}")
        attempt, last = checked[-1]
        assert attempt["verdict"] == "accepted"
        assert last["rule"] == "paired" and last["verdict"] == "beats" and last["away"] == 0, last
        assert last["base_episodes"] >= last["pairs"] - 1  # the base played the candidate's seeds
        [entry] = HarnessPool.open(tmp_path / f"move{seed}").entries()
        assert entry["stats"]["validation"]["differs"] == last


def test_a_far_base_costs_only_its_far_run(registry, tmp_path):
    """A base that never wins (true rate 0): the check stops at 0/5, and before the first
    acceptance the base plays 3 more episodes on its own observe seeds (far run 8 at
    [0.4, 0.6]), once; no base episode on any validation or confirmation seed."""
    summary = _rig(registry, tmp_path, "far", policy="rate", policy_options={"rates": {4: 0.0, 3: 0.05, 2: 0.5}},
                   target="sr:0.4-0.6", seed=0)
    assert summary["stops"][KEY] == "accepted", summary
    [(attempt, far)] = _differs(tmp_path / "far")
    run = differs.far_run((0.4, 0.6), True, 5)
    assert far == {"rule": "far base", "run": run, "base_episodes": run - 5}
    [baseline] = Journal(tmp_path / "far").events(kind="baseline")
    assert baseline["check"]["n"] == 5
    base_id = baseline["spec_id"]
    stored = [t for t in TrajectoryStore(tmp_path / "far").query(run_id="rig") if t.key.split("|")[1] == base_id[:16]]
    assert sorted(t.key.split("|")[2] for t in stored) == ["observe"] * run, [t.key for t in stored]
