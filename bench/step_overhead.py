"""Cost of a component stack per step, for both tiers of contract code, measured in one run.

* Toy24 (pure Python, a few µs per step: the worst case for any overhead): µs per step of
  the bare bridge vs stage + contract (all three hooks) + budget, with the contract in the
  trusted tier (in-process) and the untrusted tier (the jail process: one IPC round trip
  per hook call).
* ALFWorld on the real TextWorld engine (skipped with ``null`` figures when envh-alfworld
  is not installed): steps/s of the bare bridge vs the same stack in both tiers, playing
  each built game's walkthrough. On real benchmarks the jail must vanish in the noise.

Variants are interleaved and the best of several repeats is kept, so machine load hits all
alike. Last line: JSON with ``ratio`` = trusted stack ÷ bare µs/step on Toy24 and
``ratio_untrusted`` = untrusted stack ÷ bare.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from envh import Action, TaskRef, make

TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
CODE = '''
def filter_action(action, state, memo):
    memo["n"] = memo.get("n", 0) + 1
    if action.tool == "combine" and action.args["op"] == "div":
        return Block(reason="division is disabled")

def modify_transition(action, response, state, memo):
    if action.tool == "reset":
        memo["resets"] = memo.get("resets", 0) + 1

def filter_observation(observation, state, memo):
    return observation.text + " (step " + str(memo.get("n", 0)) + ")"
'''
ACTIONS = [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}), Action(tool="reset")]


def layers(trust: str, stage: dict[str, Any]) -> list[dict[str, Any]]:
    return [stage, {"kind": "contract", "code": CODE, "trust": trust}, {"kind": "budget", "max_steps": 10**9}]


def toy24_spec(trust: str | None) -> dict[str, Any]:
    stage = {"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 2, "j": 3, "op": "add"}}]}
    return {"bridge": "toy24", "layers": layers(trust, stage) if trust else []}


def us_per_step(spec: dict[str, Any], steps: int) -> tuple[float, float]:
    """Wall-clock and this process's CPU µs per step (the jail's CPU is not in the latter)."""
    env = make(spec)
    env.reset(task=TASK, seed=0)
    a, b = ACTIONS
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps // 2):
        env.step(a)
        env.step(b)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    env.close()
    return elapsed / steps * 1e6, cpu / steps * 1e6


def alfworld(repeats: int) -> dict[str, float] | None:
    try:
        from envh_alfworld.builder import build_games
        from envh_alfworld.sampling import sample_rooms
    except ImportError:
        return None
    root = Path(tempfile.mkdtemp(prefix="envh-bench-step-"))
    games = build_games(sample_rooms(2024, 3), root)
    stage = {"kind": "stage", "actions": [{"tool": "do", "args": {"command": "look"}}]}
    specs = {name: {"bridge": "alfworld", "config": {"data_path": str(root), "max_steps": None},
                    "layers": layers(name, stage) if name != "bare" else []}
             for name in ("bare", "trusted", "untrusted")}
    envs = {name: make(spec) for name, spec in specs.items()}
    best = dict.fromkeys(specs, float("inf"))
    steps = sum(len(g.walkthrough) for g in games)
    for _ in range(repeats):
        for name, env in envs.items():
            total = 0.0
            for game in games:
                env.reset(task=game.task, seed=0)
                actions = [Action(tool="do", args={"command": c}) for c in game.walkthrough]
                t0 = time.perf_counter()
                for action in actions:
                    env.step(action)
                total += time.perf_counter() - t0
            best[name] = min(best[name], total)
    for env in envs.values():
        env.close()
    return {name: steps / s for name, s in best.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    # many short runs, best kept: robust to a busy machine
    p.add_argument("--steps", type=int, default=4_000)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--alfworld-repeats", type=int, default=3)
    args = p.parse_args()
    specs = {"bare": toy24_spec(None), "trusted": toy24_spec("trusted"), "untrusted": toy24_spec("untrusted")}
    best = dict.fromkeys(specs, float("inf"))
    cpu = dict.fromkeys(specs, float("inf"))
    for _ in range(args.repeats):  # interleave so machine noise hits all variants alike
        for name, spec in specs.items():
            steps = args.steps if name != "untrusted" else max(2, args.steps // 10)
            wall, used = us_per_step(spec, steps)
            best[name], cpu[name] = min(best[name], wall), min(cpu[name], used)
    print("Toy24 (µs/step, best of repeats; wall clock, and this process's CPU):")
    for name, us in best.items():
        print(f"  {name:>10}: {us:8.2f} µs/step  ({us / best['bare']:.2f}x bare)   "
              f"cpu {cpu[name]:8.2f} µs/step ({cpu[name] / cpu['bare']:.2f}x)")
    alf = alfworld(args.alfworld_repeats)
    if alf is None:
        print("ALFWorld: envh-alfworld not installed; skipped")
    else:
        print("ALFWorld (steps/s, best of repeats):")
        for name, sps in alf.items():
            print(f"  {name:>10}: {sps:8.1f} steps/s  ({sps / alf['bare']:.3f}x bare)")
    print(json.dumps({
        "bench": "step_overhead", "bare_us_per_step": round(best["bare"], 3),
        "trusted_us_per_step": round(best["trusted"], 3), "untrusted_us_per_step": round(best["untrusted"], 3),
        "ratio": round(best["trusted"] / best["bare"], 3),
        "ratio_untrusted": round(best["untrusted"] / best["bare"], 3),
        "ratio_cpu": round(cpu["trusted"] / cpu["bare"], 3),
        "alfworld_steps_per_s": None if alf is None else {k: round(v, 1) for k, v in alf.items()},
        "alfworld_ratio_trusted": None if alf is None else round(alf["trusted"] / alf["bare"], 3),
        "alfworld_ratio_untrusted": None if alf is None else round(alf["untrusted"] / alf["bare"], 3)}))


if __name__ == "__main__":
    main()
