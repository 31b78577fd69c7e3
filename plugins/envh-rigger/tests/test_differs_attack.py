"""Attacks on the "differs from its base" rule of absolute targets (``differs.py``,
``TaskLoop._differs`` / ``_base_run``).

Claim under attack: a candidate identical to its base is accepted with probability <= 0.05
per task for every absolute target, whatever the base's true rate.

The figures here are exact: ``_task_rate`` propagates the band validator's stopping table
for the candidate's validation and confirmation, keeps the *joint* law of how many pairs
they hand to the paired test and how many of those the candidate won (so the selection of
those episodes by having said "in" is accounted for), draws the base's outcomes on those
seeds independently (a policy whose outcome the seed does not fix: the least favourable
case for a paired test), then runs the lift test's looks, with fresh pairs after, exactly.
It agrees with ``bench/identical_candidate.py``'s simulation of the loop (checked below).

Tests marked ``xfail(strict=True)`` demonstrate a hole and state the behaviour expected once
fixed; plain tests are attacks that held.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from envh import spec_id
from envh.rollout import Trajectory
from envh_rigger import differs
from envh_rigger.journal import Journal
from envh_rigger.rollouts import RUN_ID, Rollouts
from envh_rigger.run import RigConfig, rig
from envh_rigger.stats import FUTILITY_Z, GRID, LIFT_LOOKS, LiftTest, SequentialValidator, design
from scipy.stats import binom

TASK = "medium/1,2,6,6"
KEY = f"toy24/{TASK}"
NOOP = """
def filter_action(action, state, memo):
    return None
"""
M = LIFT_LOOKS[-1]  # the paired test reads at most 60 pairs


# -- exact machinery ------------------------------------------------------------------------------

def _prefix_in(d, p: float, cut: int) -> np.ndarray:
    """Q[n, s]: P(the table stops 'in' at n rollouts, with s successes among the first min(n, cut))."""
    k = d.k_max
    q = np.zeros((k + 1, k + 1))
    alive = np.ones((1, 1))  # alive[successes in the prefix, successes]
    for n in range(k + 1):
        row = np.asarray(d.table[n])
        q[n, :alive.shape[0]] += (alive * (row == 2)[None, :]).sum(axis=1)
        alive = alive * (row == 0)[None, :]
        if n == k:
            break
        width = alive.shape[1] + 1
        if n < cut:
            nxt = np.zeros((width, width))
            idx = np.arange(n + 1)
            diag = np.diagonal(alive).copy()
            nxt[idx, idx] += diag * (1 - p)
            nxt[idx + 1, idx + 1] += diag * p
        else:
            nxt = np.zeros((alive.shape[0], width))
            nxt[:, :-1] += alive * (1 - p)
            nxt[:, 1:] += alive * p
        alive = nxt
    return q


def _handed_over(d, p: float, confirm: bool) -> np.ndarray:
    """J[N, S]: P(validation (and confirmation) said 'in', handing N pairs to the paired test
    of which the candidate won S) -- the pairs as ``TaskLoop._differs`` builds them."""
    val = _prefix_in(d, p, M)
    joint = np.zeros((M + 1, M + 1))
    if not confirm:
        for n1 in range(d.k_max + 1):
            joint[min(n1, M), :min(n1, M) + 1] += val[n1, :min(n1, M) + 1]
        return joint
    by_cut: dict[int, np.ndarray] = {}
    for n1 in range(d.k_max + 1):
        if val[n1].sum() == 0:
            continue
        first = min(n1, M)
        cut = M - first
        conf = by_cut.setdefault(cut, _prefix_in(d, p, cut))
        for n2 in range(d.k_max + 1):
            if conf[n2].sum() == 0:
                continue
            take = min(n2, cut)
            for s1 in range(first + 1):
                if val[n1, s1]:
                    joint[first + take, s1:s1 + take + 1] += val[n1, s1] * conf[n2, :take + 1]
    return joint


def _masks(alpha: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """LiftTest._rule at a look of n pairs, on the (towards, away) lattice: beats, stops."""
    c = LiftTest(delta=differs.FUTILITY_LIFT, alpha=alpha).c
    a, b = np.arange(M + 1)[:, None], np.arange(M + 1)[None, :]
    s, m = a - b, a + b
    need = np.array([math.ceil(c * math.sqrt(x) - 1e-12) for x in range(2 * M + 1)])[m]
    beats = (m > 0) & (s >= need) & (s >= differs.FUTILITY_LIFT * n - 1e-9)
    if n >= M:
        return beats, np.ones_like(beats)
    var = np.maximum(m / n - (s / n) ** 2, 0.0)
    futile = s / n + FUTILITY_Z * np.sqrt(np.maximum(var, 1.0 / n) / n) < differs.FUTILITY_LIFT
    return beats, beats | futile


def _paired_round(band, p: float, up: bool, rounds: int, confirm: bool = True) -> tuple[float, float]:
    """(P(validation and confirmation say 'in' and the paired test says 'beats'), P(they say 'in'))
    for one round of a candidate identical to a base of true rate p, independent outcomes."""
    d = design(band)
    joint = _handed_over(d, p, confirm)
    alpha = differs.paired_alpha(rounds)
    fair = p * (1 - p)  # a fresh pair moves towards / away with this each
    total = 0.0
    for n in range(1, M + 1):
        row = joint[n, :n + 1]
        if row.sum() < 1e-15:
            continue
        s, k = np.arange(n + 1), np.arange(M + 1)
        won, lost = binom.pmf(k[None, :], s[:, None], 1 - p), binom.pmf(k[None, :], (n - s)[:, None], p)
        towards, away = (won, lost) if up else (lost, won)
        alive = towards.T @ (row[:, None] * away)  # alive[towards, away]
        looks, at = differs.looks(n), n
        while True:
            if at in looks:
                beats, stop = _masks(alpha, at)
                total += alive[beats].sum()
                alive = np.where(stop, 0.0, alive)
                if at >= M or alive.sum() < 1e-15:
                    break
            nxt = alive * (1 - 2 * fair)
            nxt[1:, :] += alive[:-1, :] * fair
            nxt[:, 1:] += alive[:, :-1] * fair
            alive, at = nxt, at + 1
    return total, float(joint.sum())


def _task_rate(band, p: float, rounds: int, confirm: bool = True) -> tuple[float, float]:
    """Exact (P(a task of ``rounds`` rounds accepts a candidate identical to a base of true rate p),
    its paired share), as ``TaskLoop.run`` decides: base check, then far run or paired test."""
    d = design(band)
    check, _ = d.operating(p)
    total = paired = 0.0
    for up, side in ((True, "below"), (False, "above")):
        if not check[side]:
            continue
        run = differs.far_run(band, up, rounds, confirm)
        q, vc = _paired_round(band, p, up, rounds, confirm)
        if run is not None:
            first = next(k for k in range(d.k_max + 1) if d.table[k][0 if up else k])
            assert first <= run and d.table[first][0 if up else first] == (1 if up else 3)
            far = (1 - p) ** run if up else p ** run  # such a base was judged on this side by its check
        else:
            far = 0.0
        share = (check[side] - far) * (1 - (1 - q) ** rounds)
        total += far * (1 - (1 - vc) ** rounds) + share
        paired += share
    return total, paired



# -- (a), (b), (e): the rate itself, with the selection of the paired episodes --------------------

def test_the_exact_machinery_agrees_with_the_loops_rule_simulated(bench):
    """The exact figure above against the bench's model of the loop (which feeds the paired test
    the candidate's own validation and confirmation episodes) over 4,000 tasks."""
    rng = np.random.default_rng(5)
    band, p = (0.4, 0.6), 0.3
    got = [bench.identical_task(lambda k: list(rng.random(k) < p), band, rng, SequentialValidator(),
                                seeded=False)[0] for _ in range(4000)]
    exact, _ = _task_rate(band, p, 5)
    assert abs(np.mean(got) - exact) < 4 * math.sqrt(exact * (1 - exact) / 4000), (np.mean(got), exact)


@pytest.mark.parametrize(("band", "p", "rounds"), [
    ((0.4, 0.6), 0.30, 5), ((0.4, 0.6), 0.35, 5), ((0.4, 0.6), 0.68, 5), ((0.3, 0.7), 0.20, 5),
    ((0.7, 1.0), 0.64, 5), ((0.0, 0.3), 0.36, 5), ((0.2, 0.4), 0.12, 5), ((0.1, 0.3), 0.36, 5),
    ((0.45, 0.55), 0.434, 5), ((0.1, 0.2), 0.069, 5), ((0.67, 0.92), 0.6326, 3), ((0.25, 0.5), 0.1486, 9),
    ((0.4, 0.6), 0.34, 1), ((0.7, 1.0), 0.64, 10)])
def test_an_identical_candidate_is_accepted_at_most_five_percent_with_selection_accounted(band, p, rounds):
    """Held: at the worst points found (0.02 scans of every class, narrow and one-sided bands,
    R = 1..10, and where the stated bound is tightest), the exact per-task rate with the paired
    episodes' selection accounted for stays <= 0.05 (worst seen 0.036), and the paired test's
    share stays within ``ALPHA_PAIRED`` (worst seen 0.004): the bound's ``min(0.015, ...)`` is slack."""
    total, paired = _task_rate(band, p, rounds)
    assert total <= differs.ALPHA_IDENTICAL, (band, p, rounds, total)
    assert paired <= differs.ALPHA_PAIRED, (band, p, rounds, paired)


@pytest.mark.xfail(strict=True, reason=(
    "differs.py:25-28 argues each discordant pair goes either way with 1/2 'however the episodes "
    "were chosen', so the paired test passes a round with <= ALPHA_PAIRED/R; but the candidate's "
    "episodes it reads were chosen by having said 'in' (loop.py:365-385), so given that, an "
    "identical candidate at p = 0.3 passes with 0.45 at sr:0.7-1 (alpha 0.015). The per-task rate "
    "holds only numerically, because reaching the test is rare there (test above)"))
def test_given_that_it_reached_the_paired_test_an_identical_candidate_passes_at_most_alpha():
    band, p, rounds = (0.7, 1.0), 0.3, 1
    q, reached = _paired_round(band, p, True, rounds)
    assert reached > 0
    assert q / reached <= differs.paired_alpha(rounds), (q / reached, reached)


@pytest.mark.xfail(strict=True, reason=(
    "differs.identical_bound takes the max of identical_curve on stats.GRID (0.005 steps, "
    "differs.py:90-93); far_run stops at the first n whose grid max is <= 0.05, so the stated bound "
    "can exceed 0.05 between grid points: sr:0.67-0.92, 3 rounds, far run 3: 0.0500056 at "
    "p = 0.63262 (grid max 0.0499906). The rate itself is 0.036 there (the paired share is slack)"))
def test_the_stated_bound_is_a_max_over_every_base_rate_not_only_the_grid():
    band, rounds, up = (0.67, 0.92), 3, True
    run = differs.far_run(band, up, rounds)
    assert run == 3 and differs.identical_bound(band, up, run, rounds) <= differs.ALPHA_IDENTICAL
    d = design(band)
    ps = np.linspace(0.630, 0.635, 101)
    p_in = np.array([d.operating(float(p))[0]["in"] for p in ps])
    accepts = 1 - (1 - p_in ** 2) ** rounds
    skip = (1 - ps) ** run
    fine = skip * accepts + np.minimum(differs.ALPHA_PAIRED, (1 - skip) * accepts)
    assert fine.max() <= differs.ALPHA_IDENTICAL, (float(fine.max()), float(ps[fine.argmax()]))


def test_the_far_run_reusing_the_checks_episodes_is_accounted_for():
    """Held (b): the far run's first 5 episodes are the base check's own, so the far-run event
    is not independent of the check; but every base whose first n observed episodes all fell on
    the far side was judged on that side by the check at 5 (the run rule) -- the event is a
    subset of "the task goes on", so its unconditional probability (1 - p)^n is what the bound
    needs, and it is independent of the candidate's fresh seeds."""
    for band in [(0.4, 0.6), (0.3, 0.7), (0.7, 1.0), (0.0, 0.3), (0.2, 0.4), (0.45, 0.55)]:
        d = design(band)
        for up in (True, False):
            if (band[0] <= 0) if up else (band[1] >= 1):
                continue
            run = differs.far_run(band, up, 5)
            if run is None:
                continue
            first = next(k for k in range(d.k_max + 1) if d.table[k][0 if up else k])
            assert first <= run and d.table[first][0 if up else first] == (1 if up else 3), (band, up, first)


# -- (f): a base whose replay fails is treated as a base that failed ----------------------------

def _rig(registry, tmp_path, name, **kw):
    cfg = RigConfig(spec={"bridge": "toy24"}, tasks=TASK, out=str(tmp_path / name), max_steps=40, workers=1, **kw)
    return rig(cfg, registry=registry)


def _break_base(monkeypatch, broken):
    """The task's base (the spec its first episodes, the observed ones, were played with) comes
    back as infra errors -- as a dead worker or a stalled endpoint records them -- wherever
    ``broken(phase, seed)``; every other episode is played as usual."""
    original = Rollouts.run
    seen: dict[str, str] = {}

    def run(self, spec, task, seeds, phase):
        sid = spec_id(spec, self.registry)
        if seen.setdefault("base", sid) == sid:
            for seed in dict.fromkeys(seeds):
                key = self.key(task, sid, phase, seed)
                if broken(phase, seed) and self.cached(key) is None:
                    t = Trajectory(key=key, run_id=RUN_ID, spec_id=sid, task=task, seed=seed, policy=self.policy,
                                   stop="error", error_class="infra_error", error="the worker died (injected)",
                                   retryable=True)
                    self.store.append(t)
                    self._stored[key] = t
                    self._done.add(key)
        return original(self, spec, task, seeds, phase)

    monkeypatch.setattr(Rollouts, "run", run)


def _checked(out):
    return [a["result"]["differs"] for a in (e["attempt"] for e in Journal(out).events(kind="attempt"))
            if (a.get("result") or {}).get("differs")]


def test_a_base_whose_replay_errors_does_not_let_a_no_op_candidate_through(registry, tmp_path, monkeypatch):
    _break_base(monkeypatch, lambda phase, seed: phase.startswith(("validate:", "confirm:")))
    summary = _rig(registry, tmp_path, "broken", policy="rate", policy_options={"rates": {4: 0.35}},
                   target="sr:0.4-0.6", designer="writer", designer_options={"code": NOOP}, rounds=5, seed=0)
    assert summary["stops"][KEY] != "accepted", (
        "a no-op candidate was accepted against a base whose replay died: " + repr(_checked(tmp_path / "broken")))


def test_without_errors_the_far_run_base_of_seed_20_is_not_far(registry, tmp_path):
    """Control for the next test: seed-driven rate 0.35, seed 20: the base's first 5 observed
    episodes fail (the check says below at 0/5), the 6th wins, so the far run (6 at one round)
    breaks and the paired test sees only ties: the no-op is not accepted, though round 1's
    validation and confirmation said "in"."""
    summary = _rig(registry, tmp_path, "far", policy="rate", policy_options={"rates": {4: 0.35}},
                   target="sr:0.4-0.6", designer="writer", designer_options={"code": NOOP}, rounds=1, seed=20)
    assert summary["stops"][KEY] != "accepted"
    [checked] = _checked(tmp_path / "far")
    assert checked["rule"] == "paired" and checked["towards"] == checked["away"] == 0, checked


def test_a_base_whose_far_run_episodes_error_is_not_far(registry, tmp_path, monkeypatch):
    _break_base(monkeypatch, lambda phase, seed: phase == "observe" and seed >= 25)
    summary = _rig(registry, tmp_path, "far", policy="rate", policy_options={"rates": {4: 0.35}},
                   target="sr:0.4-0.6", designer="writer", designer_options={"code": NOOP}, rounds=1, seed=20)
    assert summary["stops"][KEY] != "accepted", (
        "a no-op candidate was accepted as past a far base whose episodes died: " + repr(_checked(tmp_path / "far")))


# -- (c), (d): caching and the steps sign test ---------------------------------------------------

def test_a_candidate_with_the_bases_spec_id_reads_back_the_same_episodes():
    """Held (c): rollouts are keyed by (task, spec id, phase, seed), so a candidate whose spec is
    the base's reads back, in ``_differs``, the very episodes it was validated on: every pair
    ties and the paired test never says "beats" -- sharing a cache can only make it stricter."""
    pairs = differs.sign_pairs([1, 0, 1, 0] * 15, [1, 0, 1, 0] * 15, up=True)
    test = LiftTest(delta=differs.FUTILITY_LIFT, alpha=differs.paired_alpha(1), looks=differs.looks(60))
    assert test.decide(pairs) == ("not", True)


def test_step_counts_pair_in_the_right_direction_and_ties_never_count():
    """Held (d): above the band (too many steps) a move down is the candidate's; ties, however
    many, never count for it; a change only in failed episodes' step counts is a real change
    of the mean and is read as one."""
    assert differs.sign_pairs([12.0, 12.0, 9.0], [9.0, 14.0, 9.0], up=False) == [(0, 1), (1, 0), (0, 0)]
    assert differs.sign_pairs([5.0, 5.0, 9.0], [9.0, 4.0, 9.0], up=True) == [(0, 1), (1, 0), (0, 0)]
    test = LiftTest(delta=differs.FUTILITY_LIFT, alpha=differs.paired_alpha(5), looks=differs.looks(60))
    assert test.decide([(0.0, 0.0)] * 60) == ("not", True)
    # the boundary is calibrated at every count of discordant pairs: a lone move is never enough
    assert test.decide([(0.0, 0.0)] * 59 + [(0.0, 1.0)]) == ("not", True)


def test_the_stated_grid_max_is_within_its_grid_error_for_the_default_bands():
    """Held (a), for the bands the docs name: off the grid the stated bound moves by < 1e-4."""
    for band in [(0.4, 0.6), (0.3, 0.7), (0.7, 1.0), (0.0, 0.3)]:
        d = design(band)
        for up in (True, False):
            if (band[0] <= 0) if up else (band[1] >= 1):
                continue
            run = differs.far_run(band, up, 5)
            curve = differs.identical_curve(band, up, run, 5)
            top = float(GRID[int(np.argmax(curve))])
            ps = np.linspace(max(0.0, top - 0.005), min(1.0, top + 0.005), 41)
            p_in = np.array([d.operating(float(p))[0]["in"] for p in ps])
            acc = 1 - (1 - p_in ** 2) ** 5
            skip = (1 - ps) ** run if up else ps ** run
            fine = skip * acc + np.minimum(differs.ALPHA_PAIRED, (1 - skip) * acc)
            assert fine.max() - curve.max() < 1e-4 and fine.max() <= differs.ALPHA_IDENTICAL
