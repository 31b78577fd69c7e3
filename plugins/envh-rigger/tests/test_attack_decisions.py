"""Attacks on the loop's statistical decisions (paired lift test, base check, confirmation,
family-wise rate, report figures). Each test fails on the code as written and states the
behaviour it expects once fixed.

Policies are seed-driven (``rate`` without ``fresh``), so every rig run here is repeatable
whatever the test order.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import envh
import pytest
from envh_rigger.journal import Journal
from envh_rigger.run import RigConfig, rig

TASK = "medium/1,2,6,6"
KEY = f"toy24/{TASK}"
SPEC = {"bridge": "toy24"}
NOOP = """
def filter_action(action, state, memo):
    return None
"""
REPO = Path(__file__).resolve().parents[3]


def _rig(registry, tmp_path, name, **kw):
    kw.setdefault("tasks", TASK)
    cfg = RigConfig(spec=SPEC, out=str(tmp_path / name), max_steps=40, workers=1, **kw)
    return rig(cfg, registry=registry)


# -- 1. absolute targets: a candidate that changes nothing was accepted far above 5 % ------------

@pytest.mark.parametrize(("rate", "seed"), [(0.35, 0), (0.38, 2), (0.3, 1)])
def test_sr_target_accepts_a_candidate_that_changes_nothing_at_a_base_just_outside_the_band(
        registry, tmp_path, rate, seed):
    """Attack: the issue's criterion is "a candidate identical to the base is accepted <= 5 %
    of the time for every target kind". For ``sr:0.4-0.6`` the loop only asked the band
    validator (twice: validation + confirmation) whether the candidate is *in*; nothing asked
    whether it differs from the base. A base of true rate 0.35 (outside the band, between
    L - w and L, where no rate is stated) is judged "not in" with P = 0.43, and then a no-op
    candidate passes validation + confirmation with 0.57^2 = 0.33 per round: P(task accepts
    the no-op) = 0.37 over the default 5 rounds at p = 0.35, 0.31 at p = 0.38.
    Fixed: an "in" must also show, on the same seeds as the base, that the candidate moved
    towards the band (``differs.py``, the paired lift test); under a seed-driven policy a
    no-op plays each seed as the base does, so no pair is discordant and it never passes.
    Here: seed-driven rates 0.3-0.38, a no-op contract, 5 rounds -> not accepted, and at
    least one round got that far (the band validator alone would have accepted it)."""
    summary = _rig(registry, tmp_path, "near", policy="rate", policy_options={"rates": {4: rate}},
                   target="sr:0.4-0.6", designer="writer", designer_options={"code": NOOP}, rounds=5, seed=seed)
    assert summary["stops"][KEY] != "accepted", (
        f"a no-op candidate of true rate {rate} (outside [0.4, 0.6]) was accepted for sr:0.4-0.6")
    checked = [a["result"]["differs"] for a in (e["attempt"] for e in Journal(tmp_path / "near").events(kind="attempt"))
               if (a.get("result") or {}).get("differs")]
    assert checked, "no round passed validation and confirmation: this run does not exercise the paired check"
    assert all(d["rule"] == "paired" and d["verdict"] == "not" and d["towards"] == d["away"] == 0 for d in checked), (
        checked)


# -- 2. relative targets: 'target unreachable' from a 5-rollout estimate ------------------------

@pytest.mark.parametrize(("target", "seed"), [("beats-baseline:0.2", 33), ("beats-baseline:-0.2", 11)])
def test_a_relative_target_is_not_declared_unreachable_from_five_rollouts(registry, tmp_path, target, seed):
    """Attack: relative targets are judged by the paired lift test, but ``TaskLoop.run`` still
    computes ``band = target.band(baseline)`` from the K=5 observed rollouts and stops with
    "target_unreachable" when that band is narrower than 0.1. A base of true rate 0.5 that
    shows 4 of 5 (seed 33, P = 0.19) gets the band [1.0, 1.0] for ``beats-baseline:0.2``;
    one that shows 1 of 5 (seed 11) gets [0, 0] for ``beats-baseline:-0.2``. Both lifts are
    perfectly reachable from 0.5 (0.7 / 0.3), so this verdict is wrong, made on 5 rollouts,
    with no stated error rate (the very thing the issue removes elsewhere). Same for
    ``beats-baseline:0.15`` at 4/5 and ``weakness`` at a bite estimate >= 0.8.
    Expected: a relative target is tried (only a lift impossible at any base rate, e.g.
    |D| >= 1, is unreachable)."""
    summary = _rig(registry, tmp_path, f"unreach{seed}", policy="rate", policy_options={"rates": {4: 0.5}},
                   target=target, designer="writer", designer_options={"code": NOOP}, rounds=1, seed=seed)
    assert summary["stops"][KEY] != "target_unreachable", summary["stops"]


# -- 3. negative D: the stated characteristic is for the mirrored base rate ---------------------

def test_report_characteristic_of_a_lower_target_is_at_the_right_base_rate():
    """Attack: for ``beats-baseline:-D`` the test runs on complements (1 - outcome), but
    ``report._guarantee`` (and ``_validate_lift``'s ``lift.characteristic``) call
    ``LiftTest.characteristic(base success rate)`` without complementing. At a base of 0.9
    the lift -0.2 (to 0.7) is reachable but the report omits it ("out of reach": it computed
    0.9 -> 1.1); at a base of 0.1 the lift is impossible (-0.1) but the report prints a
    P(accept) for it (that of 0.1 -> 0.3). Expected: the figures of base 1 - p, i.e. at a
    base of 0.9 the row "lift D" with P(accept) = operating(0.1, 0.3); none at a base of 0.1."""
    from envh_rigger.report import _guarantee
    from envh_rigger.stats import LiftTest, SequentialValidator, round_alpha
    from envh_rigger.targets import parse_target

    target = parse_target("beats-baseline:-0.2")
    exact = LiftTest(delta=0.2, alpha=round_alpha(1)).operating(0.1, 0.3)[0]
    high = _guarantee(target, [0.0, 0.7], SequentialValidator(), {"success_rate": 0.9})
    assert f"lift D: P(accept) = {exact:.3f}" in high, high
    low = _guarantee(target, [0.0, 0.0], SequentialValidator(), {"success_rate": 0.1})
    assert "lift D:" not in low, low


def test_loop_lift_characteristic_of_a_lower_target_points_downwards(registry, tmp_path):
    """Attack: same bug in the journal/pool figures: for ``beats-baseline:-0.2`` every row of
    ``result.lift.characteristic`` has p_cand = p_base + lift (upwards), i.e. it describes a
    target the run never tested. Expected: p_cand <= p_base in every row of a lower target."""
    summary = _rig(registry, tmp_path, "neg", policy="rate", policy_options={"rates": {4: 0.5}},
                   target="beats-baseline:-0.2", designer="writer", designer_options={"code": NOOP},
                   rounds=1, seed=0)
    assert summary["stops"][KEY] == "rounds", summary
    (attempt,) = [e["attempt"] for e in Journal(tmp_path / "neg").events(kind="attempt")]
    rows = attempt["result"]["lift"]["characteristic"]
    assert rows and all(r["p_cand"] <= r["p_base"] + 1e-9 for r in rows.values()), rows


# -- 4. confirmation seeds are not fresh once a validation runs past CONFIRM_OFFSET -------------

class _Rollouts:
    """Records the seeds each phase plays; values alternate 0 / 20 (mean 10, sd 10)."""

    workers = 1

    def __init__(self):
        self.seen: dict[str, list[int]] = {}

    def key(self, task, sid, phase, seed):
        return (sid, phase, seed)

    def cached(self, key):
        return None

    def run(self, spec, task, seeds, phase):
        self.seen.setdefault(phase, []).extend(seeds)
        return [SimpleNamespace(v=0.0 if s % 2 else 20.0, seed=s) for s in seeds]

    def count(self):
        return sum(len(v) for v in self.seen.values())


def test_confirmation_seeds_never_replay_validation_seeds(registry):
    """Attack: validation of round r plays seeds seed + 1000 r + i, its confirmation seed +
    1000 r + 500 + i. ``--k-max`` is only checked to be >= 1, and the mean-steps validator runs
    up to ``k_max`` rollouts, so with ``--k-max 600`` a wide-spread steps target validates on
    1000..1599 and "confirms" on 1500..2099: 100 of the confirmation's episodes are the
    validation's own seeds (a seed-driven policy replays them identically), so the
    confirmation is not the independent replay the <= 0.10^2 argument needs. (Likewise the
    base check at round 0 runs into round 1's seeds past 1000 rollouts.)
    Expected: either such a --k-max is refused, or the two seed sets are disjoint."""
    from envh_rigger.budget import Budget, Usage
    from envh_rigger.loop import TaskLoop
    from envh_rigger.run import _check_numbers
    from envh_rigger.stats import SequentialValidator
    from envh_rigger.targets import parse_target

    try:
        _check_numbers(RigConfig(k_max=600, target="steps:9.9-10.1"))
    except envh.errors.EnvhError:
        return  # refused: fixed that way
    rollouts = _Rollouts()
    r = SimpleNamespace(target=parse_target("steps:9.9-10.1"), validator=SequentialValidator(k_max=600),
                        value=lambda t: t.v, measure=lambda trajs: {"n": len(trajs)}, weakness=None, seed=0,
                        rollouts=rollouts, budget=Budget(), usage=Usage(), registry=registry)
    loop = object.__new__(TaskLoop)
    loop.r, loop.task, loop.base, loop.round = r, envh.TaskRef(suite="toy24", split="medium",
                                                                instance_id="1,2,6,6"), dict(SPEC), 1
    loop.validate(dict(SPEC), 1, (9.9, 10.1))
    loop.validate(dict(SPEC), 1, (9.9, 10.1), phase="confirm:1")
    overlap = set(rollouts.seen["validate:1"]) & set(rollouts.seen["confirm:1"])
    assert not overlap, (len(rollouts.seen["validate:1"]), min(overlap), max(overlap))


# -- 5. family-wise rate: per task, not for the whole rig --------------------------------------

def test_the_whole_rigs_alpha_is_controlled_across_tasks(registry, tmp_path):
    """Attack: the criterion asks to "state the family-wise rate of the whole rig, and control
    it". ``round_alpha`` spends 0.05 per *task* (0.025 + 0.0125 + ...), so a rig over T tasks
    can accept a no-better candidate somewhere with probability up to ~0.05 T (the report
    says "<= 0.05 over the whole task"; ALPHA_RIG is named for the rig). Two tasks, two rounds
    of no-op candidates: the alphas actually spent sum to 2 x 0.0375 = 0.075 > 0.05.
    Expected: the alphas spent over the whole rig sum to <= ALPHA_RIG (e.g. split by task)."""
    from envh_rigger.stats import ALPHA_RIG

    _rig(registry, tmp_path, "two", tasks=f"{TASK};medium/1,3,4,6", policy="rate",
         policy_options={"rates": {4: 0.5}}, target="beats-baseline:0.2", designer="writer",
         designer_options={"code": NOOP}, rounds=2, seed=0)
    spent = [e["attempt"]["result"]["lift"]["alpha"] for e in Journal(tmp_path / "two").events(kind="attempt")
             if (e["attempt"].get("result") or {}).get("lift")]
    assert len(spent) == 4, spent
    assert sum(spent) <= ALPHA_RIG + 1e-12, spent


# -- 6. the bench does not cover every target kind ----------------------------------------------

def test_identical_candidate_bench_covers_steps_targets_and_all_rounds():
    """Attack: the criterion is "<= 5 % for every target kind (... in the project's bench and
    report)". ``bench/identical_candidate.py`` covers beats-baseline, weakness and
    ``sr:0.4-0.6`` only (no ``steps:`` target at all), and its sr figure is one round
    (validation + confirmation) although a task runs 5 rounds (see test 1: 0.14 per round
    becomes 0.37 per task). Expected: a steps kind, and the sr/steps figures per task over
    the default rounds."""
    path = REPO / "bench" / "identical_candidate.py"
    spec = importlib.util.spec_from_file_location("identical_candidate_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    source = path.read_text()
    assert "steps:" in source, "no steps target in the identical-candidate bench"
    assert hasattr(bench, "ROUNDS") or "rounds" in bench.absolute_accepts.__code__.co_varnames, (
        "the sr figure is per round, not per task")


def test_lift_boundary_is_exact_and_levels_hold():
    """Held (kept as a guard): an independent DP of the fair walk's crossing probability at
    C = lift_boundary(alpha, 60) is <= alpha and at C - 1e-4 exceeds it."""
    from envh_rigger.stats import lift_boundary, round_alpha

    def cross(c: float, m_max: int = 60) -> float:
        d, tot = {0: 1.0}, 0.0
        for m in range(1, m_max + 1):
            nd: dict[int, float] = {}
            for s, p in d.items():
                nd[s + 1] = nd.get(s + 1, 0.0) + p / 2
                nd[s - 1] = nd.get(s - 1, 0.0) + p / 2
            bound = math.ceil(c * math.sqrt(m) - 1e-12)
            tot += sum(nd.pop(s) for s in list(nd) if s >= bound)
            d = nd
        return tot

    for rnd in (1, 2, 3):
        a = round_alpha(rnd)
        c = lift_boundary(a, 60)
        assert cross(c) <= a < cross(c - 2e-4)
