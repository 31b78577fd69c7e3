"""Curriculum vs a fixed task distribution on a simulated learner.

The learner has a skill s; a task of difficulty d (1..10) succeeds with probability
sigmoid(k·(s − d)); each episode at difficulty d raises s by lr·exp(−(d − s − 0.5)² / 2σ²)
(practice helps most just above the current skill). The *fixed* arm draws d uniformly from
1..10 (the evaluation distribution); the *curriculum* arm lets ``envh_adaptive.curriculum.Curriculum``
(the code the ``curriculum`` layer runs, at its documented defaults: window 20, floor 0.6,
ceiling 0.85, breaker 3, early closes and one grace window after a harder move, step 1,
start at 1, and the layer's default anchor: 10% of episodes, drawn from the curriculum's own
random stream, play the fixed distribution and join no window) choose d from the observed
outcomes. Every population also runs the *classic* rule side by side (full windows only, no
grace, easier whenever a window's rate is under the floor: ``Classic`` below), and the line
states each rule's exact per-window decision rates at true rates inside the band [0.6, 0.85]
(the default's from ``Curriculum.operating_characteristic``): stepping back at an in-band rate
is the error the default bounds (≤ 0.1). Both arms are scored on the fixed evaluation set
(mean success over d = 1..10, computed exactly); the figure is episodes until that score
reaches 0.8, and the target is curriculum ÷ fixed ≤ 0.7 on the typical population (the first).

Nothing here is tuned on these populations: the curriculum runs at its defaults (the early
and grace rules were chosen on ``DEV_POPULATIONS``, other learners and seeds; the test behind
"easier" has one constant, its level 0.1, which is the error bound asked of it), and every
learner population is reported on its own, including those where the curriculum helps little
(fast learners) or where neither arm gets there in the cap.

    python bench/curriculum.py [--seeds 40] [--dev] [--anchor 0.1]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "core" / "src"), str(ROOT / "plugins" / "envh-adaptive" / "src")]

from envh_adaptive.curriculum import Curriculum, ParamBounds, ParamPlan, binom_cdf  # noqa: E402

LEVELS = range(1, 11)
CAP = 20_000
POPULATIONS = {  # name: (lr, sigma, k)
    "typical (lr 0.05, σ 0.8)": (0.05, 0.8, 1.5),
    "slow (lr 0.02, σ 0.8)": (0.02, 0.8, 1.5),
    "narrow zone (lr 0.05, σ 0.5)": (0.05, 0.5, 1.5),
    "broad zone (lr 0.05, σ 2.0)": (0.05, 2.0, 1.5),
    "fast (lr 0.2, σ 0.8)": (0.2, 0.8, 1.5),
}

# where the early/grace rule was chosen (never on the populations above): other learning
# rates, zone widths and slopes, other seeds. ``--dev`` reports them.
DEV_POPULATIONS = {
    "dev (lr 0.03, σ 0.65, k 1.2)": (0.03, 0.65, 1.2), "dev (lr 0.1, σ 1.2, k 2)": (0.1, 1.2, 2.0),
    "dev (lr 0.08, σ 0.6, k 1.5)": (0.08, 0.6, 1.5), "dev (lr 0.04, σ 1.5, k 1)": (0.04, 1.5, 1.0),
    "dev (lr 0.15, σ 0.7, k 1.8)": (0.15, 0.7, 1.8), "dev (lr 0.03, σ 0.4, k 1.5)": (0.03, 0.4, 1.5),
    "dev (lr 0.3, σ 1, k 1.5)": (0.3, 1.0, 1.5),
}


def p_success(s: float, d: int, k: float) -> float:
    return 1.0 / (1.0 + math.exp(-k * (s - d)))


def eval_score(s: float, k: float) -> float:
    return sum(p_success(s, d, k) for d in LEVELS) / len(LEVELS)


IN_BAND = (0.6, 0.7, 0.8)  # true success rates inside the band [floor 0.6, ceiling 0.85]


class Classic:
    """The classic threshold rule, for comparison: full windows of 20, harder above 0.85,
    easier below 0.6 (a point estimate, no test), breaker after 3 windows below 0.6."""

    window, floor, ceiling, breaker = 20, 0.6, 0.85, 3

    def __init__(self) -> None:
        self.values, self.below = {"level": 1}, 0
        self.outcomes: list[bool] = []

    def end_episode(self, success: bool) -> None:
        self.outcomes.append(success)
        if len(self.outcomes) < self.window:
            return
        rate, level = sum(self.outcomes) / self.window, self.values["level"]
        self.below = self.below + 1 if rate < self.floor else 0
        if self.below >= self.breaker:
            level, self.below = 1, 0
        elif rate < self.floor or rate > self.ceiling:
            level = min(max(level + (1 if rate > self.ceiling else -1), 1), 10)
        self.values, self.outcomes = {"level": level}, []

    def skip_episode(self) -> None:
        pass

    @classmethod
    def operating_characteristic(cls, p: float) -> dict[str, float]:
        w = cls.window
        below = binom_cdf(math.ceil(cls.floor * w) - 1, w, p)
        harder = 1 - binom_cdf(math.floor(cls.ceiling * w), w, p)
        return {"harder": harder, "easier": below, "hold": 1 - harder - below, "below": below}


def default_curriculum() -> Curriculum:
    plan = ParamPlan(bounds=ParamBounds(name="level", low=1, high=10, default=1), low=1, high=10, init=1)
    return Curriculum({"level": plan})


def run(arm: str, seed: int, lr: float, sigma: float, k: float, classic: bool = False,
        anchor: float = 0.1) -> int | None:
    rng, own = random.Random(seed), random.Random(f"curriculum:{seed}")  # the layer's own stream
    s = 0.0
    cur: Curriculum | Classic = Classic() if classic else default_curriculum()
    for episode in range(1, CAP + 1):
        anchored = arm == "curriculum" and own.random() < anchor
        d = rng.choice(LEVELS) if arm == "fixed" or anchored else cur.values["level"]
        success = rng.random() < p_success(s, d, k)
        s += lr * math.exp(-((d - s - 0.5) ** 2) / (2 * sigma * sigma))
        if anchored:
            cur.skip_episode()
        elif arm == "curriculum":
            cur.end_episode(success)
        if eval_score(s, k) >= 0.8:
            return episode
    return None


def arm_figures(fixed: list[int | None], curr: list[int | None], f_med: float) -> dict[str, object]:
    c_med = statistics.median(x if x is not None else CAP for x in curr)
    return {"curriculum_median": c_med, "ratio": round(c_med / f_med, 3),
            "curriculum_wins": sum(1 for a, b in zip(fixed, curr) if (b or CAP) < (a or CAP)),
            "never_curriculum": sum(x is None for x in curr)}


def in_band_rates() -> dict[str, dict[str, dict[str, float]]]:
    """Each rule's exact per-window decision rates at in-band true rates."""
    rules = {"default": default_curriculum().operating_characteristic, "classic": Classic.operating_characteristic}
    return {rule: {str(p): {k: round(v, 4) for k, v in oc(p).items()} for p in IN_BAND} for rule, oc in rules.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--dev", action="store_true", help="the development populations (seeds from 777)")
    parser.add_argument("--anchor", type=float, default=0.1, help="the layer's anchor fraction (its default 0.1)")
    args = parser.parse_args()
    populations, base = (DEV_POPULATIONS, 777) if args.dev else (POPULATIONS, 0)
    figures: dict[str, dict[str, object]] = {}
    print(f"episodes until the fixed evaluation set reaches 0.8 (median over {args.seeds} seeds; cap {CAP})")
    print(f"{'population':32} {'fixed':>8} {'default':>8} {'ratio':>6} {'classic':>8} {'ratio':>6} "
          f"{'wins (d/c)':>11} {'never (f/d/c)':>14}")
    for name, (lr, sigma, k) in populations.items():
        fixed = [run("fixed", base + seed, lr, sigma, k) for seed in range(args.seeds)]
        f_med = statistics.median(x if x is not None else CAP for x in fixed)
        arms = {rule: arm_figures(fixed, [run("curriculum", base + 10_000 + seed, lr, sigma, k, rule == "classic",
                                              args.anchor) for seed in range(args.seeds)], f_med)
                for rule in ("default", "classic")}
        d, c = arms["default"], arms["classic"]
        print(f"{name:32} {f_med:8.0f} {d['curriculum_median']:8.0f} {d['ratio']:6.2f} {c['curriculum_median']:8.0f} "
              f"{c['ratio']:6.2f} {d['curriculum_wins']:>5}/{c['curriculum_wins']:<5} "
              f"{sum(x is None for x in fixed):>6}/{d['never_curriculum']}/{c['never_curriculum']}")
        figures[name] = {"fixed_median": f_med, **arms}
    rates = in_band_rates()
    for rule, by_p in rates.items():
        print(f"{rule:8} per window at a true in-band rate: "
              + ", ".join(f"p={p}: easier {r['easier']:.3f} harder {r['harder']:.3f}" for p, r in by_p.items()))
    headline = next(iter(figures.values()))
    # the headline is the typical population; the worst one rides on the same line, so a
    # population where the curriculum loses is not left to the table above
    worst = max(figures, key=lambda n: figures[n]["default"]["ratio"])  # type: ignore[index]
    ratio = headline["default"]["ratio"]  # type: ignore[index]
    print(json.dumps({"populations": figures, "ratio": ratio, "classic_ratio": headline["classic"]["ratio"],  # type: ignore[index]
                      "target": 0.7, "target_met": ratio <= 0.7,  # type: ignore[operator]
                      "in_band_easier_max": max(r["easier"] for r in rates["default"].values()),
                      "in_band_rates": rates, "worst_population": worst,
                      "worst_ratio": figures[worst]["default"]["ratio"],  # type: ignore[index]
                      "seeds": args.seeds, "cap": CAP, "anchor": args.anchor}))


if __name__ == "__main__":
    main()
