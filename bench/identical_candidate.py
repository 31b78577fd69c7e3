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
- ``sr:0.4-0.6`` and ``steps:6-8`` (normal step counts, sd 2), per *task* of 5 rounds: a
  candidate identical to a base of true rate p (mean mu) is validated only when the base
  was not judged in the band (the band validator on the base, from its 5 observed rollouts
  on); it is accepted when it is judged "in" twice (validation and the confirmation on
  fresh seeds), in any of the rounds. Per class of p (clearly out: p <= L - w or >= H + w;
  near the band; inside). Nothing compares an absolute target's candidate with its base,
  so near the band (where the validator states no rate) an identical candidate is
  accepted well above 5 % per task: this is printed, not hidden.

The old rule (the band [base estimate + D, 1] judged by the band validator from a
5-rollout base estimate) is simulated in the same run as the baseline, for beats-baseline
and weakness. The figure per round is at round 1's alpha (0.025; later rounds halve it);
the family-wise rate over a task is the sum, <= 0.05.

Prints a table per kind and, last, one JSON line: per kind the worst acceptance rate of an
identical candidate (``identical_max``), the old rule's at the same points, and ``ratio``
= worst new / worst old over the relative kinds.

    python bench/identical_candidate.py [--validations 10000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from envh_rigger.stats import LiftTest, SequentialValidator, round_alpha

ROUNDS = 5  # the loop's default --rounds: absolute kinds are reported per task
BASE_RATES = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95)
RELATIVE = {"beats-baseline:0.2": 0.2, "beats-baseline:0.1": 0.1, "beats-baseline:0": 0.0,
            "beats-baseline:-0.2": -0.2, "weakness (rise 0.2)": 0.2}


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--validations", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
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
    band = (0.4, 0.6)
    print(f"\nsr:{band[0]}-{band[1]}, a whole task of {ROUNDS} rounds (the base judged first; each candidate "
          "validated and confirmed): p | P(task accepts an identical candidate) | class")
    classes: dict[str, list[float]] = {"clearly out": [], "near": [], "inside": []}
    for p in (0.0, 0.1, 0.2, 0.3, 0.35, 0.38, 0.4, 0.5, 0.6, 0.62, 0.65, 0.7, 0.8, 0.9, 1.0):
        rate = float(np.mean([absolute_accepts(lambda k, p=p: list(rng.random(k) < p), band, rng, validator)
                              for _ in range(n // 4)]))
        cls = "inside" if band[0] <= p <= band[1] else "clearly out" if p <= 0.2 or p >= 0.8 else "near"
        classes[cls].append(rate)
        print(f"  {p:4.2f} | {rate:.4f} | {cls}")
    out["sr:0.4-0.6"] = {f"{k}_max": round(max(v), 4) for k, v in classes.items()}
    band = (6.0, 8.0)
    print(f"\nsteps:{band[0]:g}-{band[1]:g} (normal step counts, sd 2), a whole task of {ROUNDS} rounds: mean | "
          "P(task accepts an identical candidate) | class")
    classes = {"clearly out": [], "near": [], "inside": []}
    for mu in (3.0, 4.0, 5.0, 5.5, 6.0, 7.0, 8.0, 8.5, 9.0, 10.0, 11.0):
        rate = float(np.mean([absolute_accepts(lambda k, mu=mu: list(rng.normal(mu, 2.0, k)), band, rng, validator,
                                               binary=False) for _ in range(n // 20)]))
        cls = "inside" if band[0] <= mu <= band[1] else "clearly out" if mu <= 4 or mu >= 10 else "near"
        classes[cls].append(rate)
        print(f"  {mu:4.1f} | {rate:.4f} | {cls}")
    out["steps:6-8"] = {f"{k}_max": round(max(v), 4) for k, v in classes.items()}
    worst_new = max(v["identical_max"] for k, v in out.items() if k in RELATIVE)
    worst_old = max(v["old_max"] for k, v in out.items() if k in RELATIVE)
    print(f"\nworst identical-candidate acceptance over relative kinds: {worst_new:.4f} (old rule {worst_old:.3f}); "
          f"{time.time() - t0:.0f} s")
    print(json.dumps({"bench": "identical_candidate", "validations": n, "alpha_round1": alpha,
                      "kinds": {k: {kk: vv for kk, vv in v.items() if kk != "by_base_rate"} for k, v in out.items()},
                      "ratio": round(worst_new / worst_old, 4) if worst_old else None}))


if __name__ == "__main__":
    main()
