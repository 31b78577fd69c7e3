"""How often the designer loop accepts a candidate that changes nothing, per target kind.

A candidate identical to its base has the base's true rate. For every target kind the loop
judges, this benchmark drives the loop's own decision code (``envh_rigger.stats``: the
paired ``LiftTest`` for relative targets, the band validator plus the confirmation run for
absolute ones) with simulated outcomes and counts acceptances over many validations:

- ``beats-baseline:D`` (D = 0.2, 0.1, 0, -0.2) and ``weakness`` (a rise of 0.2 in the bite
  rate): base and candidate play the same seeds. Pairs are drawn independently (the least
  favourable case) and, separately, from a seed-driven policy (the candidate's outcome
  equals the base's with probability 0.8, else a fresh draw), at base rates 0.05 .. 0.95.
  The exact figure (``LiftTest.operating``) is printed beside the simulated one.
- absolute targets (``sr:0.4-0.6``; the main job's ``sr:0.3-0.7``; the one-sided ``sr:0.7-1``
  and ``sr:0-0.3``; ``steps:6-8`` on normal step counts, sd 2), per *task* of 5 rounds: the
  base is judged by the band validator (from its 5 observed rollouts on) and the task closes
  when it is "in"; otherwise each round's identical candidate is validated and confirmed on
  fresh seeds and, when both say "in", must show that it moved from its base towards the
  band (``envh_rigger.differs``): free when the base's first ``far_run`` observed episodes
  all fell on the far side, else by the paired lift test on the seeds of its validation and
  confirmation. Pairs are independent (the least favourable case) or seed-driven (the
  identical candidate plays each seed as the base does). Per class of the base's true rate
  p: clearly out (p <= L - w or >= H + w), near the band (between), inside; beside it the
  bound the rule states at p (``differs.identical_bound``'s terms, exact), the base
  episodes the rule played per task, and the rule before it (the band validator alone).
- a candidate that does move (power and cost): base p_b, candidate p_c in the band, one
  round; P(accepted | validation and confirmation said "in") and the base episodes the
  check played, for a far base (p_b = 0: the far run) and near ones (paired test).

The old rule (the band [base estimate + D, 1] judged by the band validator from a
5-rollout base estimate) is simulated in the same run as the baseline, for beats-baseline
and weakness. The figure per round is at round 1's alpha (0.025; later rounds halve it);
the family-wise rate over a task is the sum, <= 0.05.

Prints a table per kind and, last, one JSON line: per relative kind the worst acceptance rate
of an identical candidate (``identical_max``) and the old rule's at the same points; per
absolute kind the worst per class (``near_max``, ``clearly_out_max``, ``inside_max``), the
rule before it (``near_max_before``) and the stated bound (``bound_max``); and ``ratio`` =
worst new / worst old over the relative kinds.

    python bench/identical_candidate.py [--validations 10000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from envh_rigger import differs
from envh_rigger.stats import GRID, LiftTest, SequentialValidator, guarantee_points, round_alpha

ROUNDS = 5  # the loop's default --rounds: absolute kinds are reported per task
BASE_RATES = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95)
RELATIVE = {"beats-baseline:0.2": 0.2, "beats-baseline:0.1": 0.1, "beats-baseline:0": 0.0,
            "beats-baseline:-0.2": -0.2, "weakness (rise 0.2)": 0.2}
# absolute success-rate bands and the base rates tried: every class, near the band densely
ABSOLUTE = {
    "sr:0.4-0.6": ((0.4, 0.6), (0.0, 0.1, 0.2, 0.25, 0.28, 0.3, 0.33, 0.35, 0.38, 0.4, 0.5, 0.6, 0.62, 0.65, 0.67,
                                0.7, 0.72, 0.75, 0.8, 0.9, 1.0)),
    "sr:0.3-0.7": ((0.3, 0.7), (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.28, 0.5, 0.72, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)),
    "sr:0.7-1": ((0.7, 1.0), (0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.68, 0.8, 0.9)),
    "sr:0-0.3": ((0.0, 0.3), (0.1, 0.2, 0.32, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.9)),
}
STEPS = ((6.0, 8.0), (3.0, 4.0, 5.0, 5.5, 6.0, 7.0, 8.0, 8.5, 9.0, 10.0, 11.0))  # normal step counts, sd 2


def lift_accepts(test: LiftTest, p: float, rng: np.random.Generator, copy: float) -> tuple[bool, int]:
    """One validation of an identical candidate: pairs until the test stops."""
    pairs: list[tuple[float, float]] = []
    while (more := test.next_batch(pairs)) > 0:
        for _ in range(more):
            b = float(rng.random() < p)
            c = b if rng.random() < copy else float(rng.random() < p)
            pairs.append((b, c))
    verdict, _ = test.decide(pairs)
    return verdict == "beats", len(pairs)


def old_rule_accepts(delta: float, p: float, rng: np.random.Generator, validator: SequentialValidator) -> bool:
    """The old rule: band [estimate + D, 1] (or [0, estimate + D]) from 5 base rollouts."""
    est = float(np.mean(rng.random(5) < p))
    band = (min(1.0, est + delta), 1.0) if delta >= 0 else (0.0, max(0.0, est + delta))
    if band[1] - band[0] < 0.1 - 1e-9:
        return False  # unreachable: not tried
    if band[0] <= est <= band[1] and delta == 0:
        band = (est, 1.0)
    decision, _ = validator.run(lambda n: list(rng.random(n) < p), band)
    return decision == "in"


def absolute_accepts(draw, band: tuple[float, float], rng: np.random.Generator,
                     validator: SequentialValidator, *, binary: bool = True, rounds: int = ROUNDS) -> bool:
    """A whole task: the base judged once (from its 5 observed rollouts on), then up to
    ``rounds`` identical candidates, each validated and confirmed on fresh seeds."""
    values = list(draw(5))
    while (more := validator.next_batch(values, band, binary=binary)) > 0:
        values += list(draw(more))
    if validator.decide(values, band, binary=binary)[0] == "in":
        return False  # the task closes: baseline in target
    for _ in range(rounds):
        decisions = []
        for _ in range(2):  # validation, then the confirmation on fresh seeds
            decision, _ = validator.run(draw, band, binary=binary)
            decisions.append(decision)
            if decision != "in":
                break
        if decisions == ["in", "in"]:
            return True
    return False


def identical_task(draw, band: tuple[float, float], rng: np.random.Generator, validator: SequentialValidator,
                   *, seeded: bool, binary: bool = True, rounds: int = ROUNDS) -> tuple[bool, int]:
    """A whole task under the loop's rule (``TaskLoop.run``, ``_confirm``, ``_differs``): the
    base judged from its 5 observed rollouts on; then up to ``rounds`` identical candidates,
    each validated and confirmed on fresh seeds and, when both say "in", checked against the
    base (far run, else the paired test). ``seeded``: the base plays each seed as the
    candidate did (a seed-driven policy); else its outcomes are fresh draws. Returns whether
    the task accepted one and the base episodes the check played."""
    observed = list(draw(5))
    while (more := validator.next_batch(observed, band, binary=binary)) > 0:
        observed += list(draw(more))
    decision = validator.decide(observed, band, binary=binary)[0]
    if decision == "in":
        return False, 0  # the task closes: baseline in target
    up = decision == "below"
    run = differs.far_run(band, up, rounds) if binary else None
    far = 0.0 if up else 1.0
    played = 0
    for _ in range(rounds):
        first, values = validator.run(draw, band, binary=binary)
        if first != "in":
            continue
        again, more_values = validator.run(draw, band, binary=binary)
        if again != "in":
            continue
        if run is not None and all(v == far for v in observed[:run]):
            if len(observed) < run:
                played += run - len(observed)
                observed += list(draw(run - len(observed)))
            if all(v == far for v in observed[:run]):
                return True, played
        cand = [float(v) for v in (values + more_values)[:60]]

        def base_of(c: list[float]) -> list[float]:
            return list(c) if seeded else [float(v) for v in draw(len(c))]

        base = base_of(cand)
        played += len(base)
        pairs = differs.sign_pairs(base, cand, up)
        test = LiftTest(delta=differs.FUTILITY_LIFT, alpha=differs.paired_alpha(rounds), looks=differs.looks(len(pairs)))
        while (more := test.next_batch(pairs)) > 0:
            c = [float(v) for v in draw(more)]
            played += more
            pairs += differs.sign_pairs(base_of(c), c, up)
        if test.decide(pairs)[0] == "beats":
            return True, played
    return False, played


def moving_candidate(p_base: float, p_cand: float, band: tuple[float, float], rng: np.random.Generator,
                     validator: SequentialValidator, *, seeded: bool) -> tuple[bool | None, int]:
    """One round of a candidate that does move (p_base -> p_cand): None when validation or
    confirmation did not say "in" (the check is not reached), else whether it was accepted
    and the base episodes the check played. ``seeded``: one uniform per seed decides both
    (a seed-driven policy: the candidate wins wherever the base does, and more)."""
    observed = list(rng.random(5) < p_base)
    while (more := validator.next_batch(observed, band)) > 0:
        observed += list(rng.random(more) < p_base)
    decision = validator.decide(observed, band)[0]
    if decision == "in":
        return None, 0
    up = decision == "below"
    uniforms: list[float] = []

    def draw(k: int) -> list[bool]:
        u = list(rng.random(k))
        uniforms.extend(u)
        return [x < p_cand for x in u]

    for _ in range(2):
        if validator.run(draw, band)[0] != "in":
            return None, 0
    run = differs.far_run(band, up, ROUNDS)
    far = 0.0 if up else 1.0
    if run is not None and all(float(v) == far for v in observed[:run]):
        played = max(0, run - len(observed))
        observed += list(rng.random(played) < p_base)
        if all(float(v) == far for v in observed[:run]):
            return True, played

    def pair(us: list[float]) -> list[tuple[float, float]]:
        base = [float(u < p_base) if seeded else float(rng.random() < p_base) for u in us]
        return differs.sign_pairs(base, [float(u < p_cand) for u in us], up)

    pairs = pair(uniforms[:60])
    test = LiftTest(delta=differs.FUTILITY_LIFT, alpha=differs.paired_alpha(ROUNDS), looks=differs.looks(len(pairs)))
    while (more := test.next_batch(pairs)) > 0:
        pairs += pair(list(rng.random(more)))
    return test.decide(pairs)[0] == "beats", len(pairs)


def _class(p: float, band: tuple[float, float]) -> str:
    points = guarantee_points(band)
    if band[0] <= p <= band[1]:
        return "inside"
    out = p <= points.get("out_below", -1.0) or p >= points.get("out_above", 2.0)
    return "clearly out" if out else "near"


def _bound_at(p: float, band: tuple[float, float], binary: bool = True) -> float:
    """The rule's stated bound at a base of true rate p (steps: the paired test's alphas)."""
    if not binary:
        return differs.ALPHA_PAIRED
    sides = [up for up in (True, False) if (band[0] > 0 if up else band[1] < 1)]
    return max(float(np.interp(p, GRID, differs.identical_curve(band, up, differs.far_run(band, up, ROUNDS), ROUNDS)))
               for up in sides)


def absolute_kind(name: str, band: tuple[float, float], points, draw_of, rng: np.random.Generator,
                  validator: SequentialValidator, n: int, *, binary: bool = True) -> dict:
    """The table of one absolute kind: identical candidates per task, new rule and the rule before."""
    print(f"\n{name}, a whole task of {ROUNDS} rounds: base {'p' if binary else 'mean'} | P(task accepts an "
          "identical candidate): independent | seed-driven | stated bound | base episodes per task | "
          "band validator alone | class")
    if binary:
        runs = {side: differs.far_run(band, up, ROUNDS) for side, up in (("below", True), ("above", False))
                if (band[0] > 0 if up else band[1] < 1)}
        print("  far run (base episodes all on the far side that skip the paired test): "
              + ", ".join(f"base {side} the band {run}" for side, run in runs.items()))
    classes: dict[str, dict[str, list[float]]] = {}
    for p in points:
        ind = [identical_task(draw_of(p), band, rng, validator, seeded=False, binary=binary) for _ in range(n)]
        seeded = [identical_task(draw_of(p), band, rng, validator, seeded=True, binary=binary) for _ in range(n)]
        before = float(np.mean([absolute_accepts(draw_of(p), band, rng, validator, binary=binary)
                                for _ in range(max(1, n // 4))]))
        rate_ind, rate_seeded = float(np.mean([a for a, _ in ind])), float(np.mean([a for a, _ in seeded]))
        played = float(np.mean([e for _, e in ind]))
        bound = _bound_at(p, band, binary)
        cls = _class(p, band) if binary else ("inside" if band[0] <= p <= band[1] else
                                              "clearly out" if p <= band[0] - 2 or p >= band[1] + 2 else "near")
        row = classes.setdefault(cls, {"new": [], "before": [], "bound": [], "played": []})
        row["new"].append(max(rate_ind, rate_seeded))
        row["before"].append(before)
        row["bound"].append(bound)
        row["played"].append(played)
        print(f"  {p:5.2f} | {rate_ind:.4f} | {rate_seeded:.4f} | {bound:.4f} | {played:5.1f} | {before:.3f} | {cls}")
    out = {}
    for cls, row in classes.items():
        key = cls.replace(" ", "_")
        out[f"{key}_max"] = round(max(row["new"]), 4)
        out[f"{key}_max_before"] = round(max(row["before"]), 4)
        out[f"{key}_base_episodes_max"] = round(max(row["played"]), 1)
    out["bound_max"] = round(max(max(r["bound"]) for r in classes.values()), 4)
    print("  per class, worst: " + "; ".join(
        f"{cls} {max(r['new']):.4f} (before {max(r['before']):.3f}; <= {max(r['played']):.1f} base episodes a task)"
        for cls, r in classes.items()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--validations", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps-divisor", type=int, default=10,
                    help="steps targets run validations / this many tasks a point (their validator is slow)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    validator = SequentialValidator()
    n = args.validations
    t0 = time.time()
    out: dict[str, dict] = {}
    alpha = round_alpha(1)
    print(f"identical candidates, {n} validations per point, round 1 (alpha {alpha:g}; halves each round)")
    for kind, delta in RELATIVE.items():
        test = LiftTest(delta=abs(delta), alpha=alpha)
        rows = {}
        print(f"\n{kind}: base p | exact (independent) | simulated independent | simulated seed-driven "
              "| mean pairs | old rule")
        for p in BASE_RATES:
            q = 1 - p if delta < 0 else p  # a lower target compares complements
            exact, pairs = test.operating(q, q)
            ind = [lift_accepts(test, q, rng, 0.0) for _ in range(n)]
            seeded = [lift_accepts(test, q, rng, 0.8) for _ in range(n)]
            old = float(np.mean([old_rule_accepts(delta, p, rng, validator) for _ in range(n // 4)]))
            rows[p] = {"exact": exact, "independent": float(np.mean([a for a, _ in ind])),
                       "seeded": float(np.mean([a for a, _ in seeded])), "pairs": pairs, "old": old}
            print(f"  {p:4.2f} | {exact:.4f} | {rows[p]['independent']:.4f} | {rows[p]['seeded']:.4f} | "
                  f"{pairs:5.1f} | {old:.3f}")
        worst = max(max(r["exact"], r["independent"], r["seeded"]) for r in rows.values())
        out[kind] = {"identical_max": round(worst, 4), "old_max": round(max(r["old"] for r in rows.values()), 4),
                     "by_base_rate": {str(p): {k: round(v, 4) for k, v in r.items()} for p, r in rows.items()}}
        # power beside it (exact, independent outcomes): what the test buys with that rate
        print("  power at base 0.3 (exact): " + "; ".join(
            f"{k} {v['p_beats']:.2f} ({v['pairs']:.0f} pairs)" for k, v in test.characteristic(0.3).items()
            if k != "no lift"))
    for name, (band, points) in ABSOLUTE.items():
        out[name] = absolute_kind(name, band, points, lambda p: (lambda k, p=p: list(rng.random(k) < p)), rng,
                                  validator, n)
    band, means = STEPS
    n_steps = max(1, n // args.steps_divisor)
    out["steps:6-8"] = absolute_kind(f"steps:{band[0]:g}-{band[1]:g} (normal step counts, sd 2; {n_steps} tasks "
                                     "a point)", band, means,
                                     lambda mu: (lambda k, mu=mu: list(rng.normal(mu, 2.0, k))), rng, validator,
                                     n_steps, binary=False)
    print("\na candidate that moves, one round: base p -> candidate p | P(accepted | validation and confirmation "
          "said in): seed-driven, independent | base episodes the check played (mean)")
    moving = {}
    for (p_b, p_c) in ((0.0, 0.5), (0.0, 0.35), (0.2, 0.5), (0.3, 0.5), (0.35, 0.5), (0.35, 0.45), (0.7, 0.5)):
        cells = []
        for seeded in (True, False):
            runs = [moving_candidate(p_b, p_c, (0.4, 0.6), rng, validator, seeded=seeded) for _ in range(n // 4)]
            got = [(a, e) for a, e in runs if a is not None]
            cells.append((float(np.mean([a for a, _ in got])) if got else float("nan"),
                          float(np.mean([e for _, e in got])) if got else float("nan")))
        moving[f"{p_b}->{p_c}"] = {"seeded": round(cells[0][0], 4), "independent": round(cells[1][0], 4),
                                   "base_episodes": round(cells[0][1], 1)}
        print(f"  [0.4, 0.6] {p_b:.2f} -> {p_c:.2f} | {cells[0][0]:.3f}, {cells[1][0]:.3f} | {cells[0][1]:.1f}, "
              f"{cells[1][1]:.1f}")
    for (p_b, p_c) in ((0.0, 0.5), (0.0, 0.3), (0.15, 0.5)):
        runs = [moving_candidate(p_b, p_c, (0.3, 0.7), rng, validator, seeded=True) for _ in range(n // 4)]
        got = [(a, e) for a, e in runs if a is not None]
        acc, eps = float(np.mean([a for a, _ in got])), float(np.mean([e for _, e in got]))
        moving[f"main {p_b}->{p_c}"] = {"seeded": round(acc, 4), "base_episodes": round(eps, 1)}
        print(f"  [0.3, 0.7] {p_b:.2f} -> {p_c:.2f} | {acc:.3f} (seed-driven) | {eps:.1f}")
    worst_new = max(v["identical_max"] for k, v in out.items() if k in RELATIVE)
    worst_old = max(v["old_max"] for k, v in out.items() if k in RELATIVE)
    near = max(v["near_max"] for k, v in out.items() if k not in RELATIVE)
    print(f"worst identical-candidate acceptance near an absolute band, per task: {near:.4f}")
    print(f"\nworst identical-candidate acceptance over relative kinds: {worst_new:.4f} (old rule {worst_old:.3f}); "
          f"{time.time() - t0:.0f} s")
    print(json.dumps({"bench": "identical_candidate", "validations": n, "alpha_round1": alpha,
                      "kinds": {k: {kk: vv for kk, vv in v.items() if kk != "by_base_rate"} for k, v in out.items()},
                      "absolute_near_max": near, "moving": moving,
                      "ratio": round(worst_new / worst_old, 4) if worst_old else None}))


if __name__ == "__main__":
    main()
