"""Sequential validator vs a fixed batch of K=5 rollouts on band classification.

Simulates tasks whose success probability p is known, asks each validator whether p is
below, inside or above the target band [0.4, 0.6], and counts wrong decisions and
rollouts per decision. Two task populations: ``bimodal`` (p ~ Beta(0.5, 0.5): most
tasks are nearly always or nearly never solved, as per-task success rates of real
policies tend to be) and ``uniform`` (p ~ U(0, 1)). The last line is JSON; ``ratio`` is
the sequential validator's mean rollouts per decision on the bimodal population ÷ 5.

    python bench/validator_efficiency.py [--decisions 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from envh_rigger.stats import SequentialValidator, fixed_decision, true_class

BAND = (0.4, 0.6)
FIXED_K = 5
POPULATIONS = {
    "bimodal": lambda rng: rng.betavariate(0.5, 0.5),
    "uniform": lambda rng: rng.random(),
}


def simulate(population: str, decisions: int, seed: int, validator: SequentialValidator) -> dict[str, float]:
    """Error rates and mean rollouts of both validators on the same tasks."""
    rng = random.Random(seed)
    draw = POPULATIONS[population]
    seq_err = fixed_err = seq_rollouts = 0
    for _ in range(decisions):
        p = draw(rng)
        truth = true_class(p, BAND)
        decision, outcomes = validator.run(lambda k, p=p: [rng.random() < p for _ in range(k)], BAND)
        seq_err += decision != truth
        seq_rollouts += len(outcomes)
        fixed_err += fixed_decision([rng.random() < p for _ in range(FIXED_K)], BAND) != truth
    return {"sequential_error": seq_err / decisions, "fixed_error": fixed_err / decisions,
            "sequential_mean_rollouts": seq_rollouts / decisions,
            "ratio": seq_rollouts / decisions / FIXED_K}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    validator = SequentialValidator()  # the loop's default
    print(f"band {BAND}; fixed K={FIXED_K}; sequential {validator}")
    t0 = time.perf_counter()
    results = {}
    for name in POPULATIONS:
        r = results[name] = simulate(name, args.decisions, args.seed, validator)
        print(f"{name:>8}: sequential error {r['sequential_error']:.3f} with "
              f"{r['sequential_mean_rollouts']:.2f} rollouts/decision; fixed K=5 error "
              f"{r['fixed_error']:.3f} with 5.00 (ratio {r['ratio']:.3f})")
    head = results["bimodal"]
    print(json.dumps({
        "bench": "validator_efficiency", "band": list(BAND), "decisions": args.decisions,
        "ratio": round(head["ratio"], 4),
        "sequential_error": round(head["sequential_error"], 4),
        "fixed_error": round(head["fixed_error"], 4),
        "sequential_mean_rollouts": round(head["sequential_mean_rollouts"], 3),
        "uniform": {k: round(v, 4) for k, v in results["uniform"].items()},
        "seconds": round(time.perf_counter() - t0, 2)}))


if __name__ == "__main__":
    main()
