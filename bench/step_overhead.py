"""Cost of a component stack per step, for both tiers of contract code, measured in one run.

* Toy24 (pure Python, a few µs per step: the worst case for any overhead): µs per step of
  the bare bridge vs stage + contract (all three hooks) + budget, with the contract in the
  trusted tier (in-process) and the untrusted tier (the jail process: two IPC round trips
  a step, ``filter_action`` and then the other two hooks together).
* ALFWorld on the real TextWorld engine (skipped with ``null`` figures when envh-alfworld
  is not installed): steps/s of the bare bridge vs the same stack in both tiers, playing
  each built game's walkthrough. On real benchmarks the jail must vanish in the noise.
* The jail itself: what one more jail process costs (each env stack with untrusted code
  has its own): start-up to the first loaded program, and its resident memory.

Every class is reported in wall-clock and in this process's CPU time (the untrusted tier's
CPU figure leaves out the jail process's own CPU). Variants are interleaved and the best of
several repeats is kept, so machine load hits all alike; the load average is printed.
Last line: JSON with ``ratio`` = trusted stack ÷ bare µs/step on Toy24 (wall clock) and
``ratio_untrusted`` = untrusted stack ÷ bare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    env = make(spec, trust="trusted")  # the layers say which tier: "untrusted" lowers it
    env.reset(task=TASK, seed=0)
    a, b = ACTIONS
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps // 2):
        env.step(a)
        env.step(b)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    env.close()
    return elapsed / steps * 1e6, cpu / steps * 1e6


def alfworld(repeats: int) -> dict[str, dict[str, float]] | None:
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
    envs = {name: make(spec, trust="trusted") for name, spec in specs.items()}  # "untrusted" layers lower it
    best = dict.fromkeys(specs, float("inf"))
    best_cpu = dict.fromkeys(specs, float("inf"))
    steps = sum(len(g.walkthrough) for g in games)
    for _ in range(repeats):
        for name, env in envs.items():
            total = used = 0.0
            for game in games:
                env.reset(task=game.task, seed=0)
                actions = [Action(tool="do", args={"command": c}) for c in game.walkthrough]
                t0, c0 = time.perf_counter(), time.process_time()
                for action in actions:
                    env.step(action)
                total += time.perf_counter() - t0
                used += time.process_time() - c0
            best[name], best_cpu[name] = min(best[name], total), min(best_cpu[name], used)
    for env in envs.values():
        env.close()
    return {"steps_per_s": {name: steps / s for name, s in best.items()},
            "cpu_steps_per_s": {name: steps / s for name, s in best_cpu.items()}}


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def _tree(pid: int) -> list[int]:
    out, todo = [pid], [pid]
    while todo:
        try:
            with open(f"/proc/{todo[0]}/task/{todo[0]}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except OSError:
            kids = []
        todo = todo[1:] + kids
        out += kids
    return out


def jail_costs(repeats: int) -> dict[str, float]:
    """Start-up of one more jail (bubblewrap, Python, the capability modules, one program
    loaded) and the resident memory of its processes."""
    from envh.jail import Jail

    starts, rss = [], []
    for _ in range(repeats):
        jail = Jail()
        t0 = time.perf_counter()
        program = jail.load(CODE, ("filter_action", "modify_transition", "filter_observation"),
                            time_limit=0.25, max_ops=200_000)
        starts.append(time.perf_counter() - t0)
        assert jail.pid is not None
        rss.append(sum(_rss_mb(p) for p in _tree(jail.pid)))
        jail.unload(program)
        jail.close()
    return {"start_ms": statistics.median(starts) * 1000, "start_ms_min": min(starts) * 1000,
            "rss_mb": statistics.median(rss)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    # many short runs, best kept: robust to a busy machine
    p.add_argument("--steps", type=int, default=4_000)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--alfworld-repeats", type=int, default=5)
    p.add_argument("--jail-repeats", type=int, default=5)
    args = p.parse_args()
    load_start = os.getloadavg()
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} "
          f"({os.cpu_count()} CPUs)")
    specs = {"bare": toy24_spec(None), "trusted": toy24_spec("trusted"), "untrusted": toy24_spec("untrusted")}
    best = dict.fromkeys(specs, float("inf"))
    cpu = dict.fromkeys(specs, float("inf"))
    for _ in range(args.repeats):  # interleave so machine noise hits all variants alike
        for name, spec in specs.items():
            steps = args.steps if name != "untrusted" else max(2, args.steps // 10)
            wall, used = us_per_step(spec, steps)
            best[name], cpu[name] = min(best[name], wall), min(cpu[name], used)
    print("Toy24 (µs/step, best of repeats; stack ÷ bare, lower is better; wall clock, and this "
          "process's CPU — the untrusted tier's CPU leaves out the jail's):")
    for name, us in best.items():
        print(f"  {name:>10}: wall {us:8.2f} µs/step ({us / best['bare']:.3f}x bare)   "
              f"cpu {cpu[name]:8.2f} µs/step ({cpu[name] / cpu['bare']:.3f}x bare)")
    alf = alfworld(args.alfworld_repeats)
    alf_ratio: dict[str, float | None] = {}
    if alf is None:
        print("ALFWorld: envh-alfworld not installed; skipped")
    else:
        wall_sps, cpu_sps = alf["steps_per_s"], alf["cpu_steps_per_s"]
        print("ALFWorld (steps/s, best of repeats; stack ÷ bare throughput, higher is better, target >= 0.95):")
        for name in wall_sps:
            alf_ratio[name] = wall_sps[name] / wall_sps["bare"]
            alf_ratio[name + "_cpu"] = cpu_sps[name] / cpu_sps["bare"]
            print(f"  {name:>10}: wall {wall_sps[name]:8.1f} steps/s ({alf_ratio[name]:.3f}x bare)   "
                  f"cpu {cpu_sps[name]:8.1f} steps/s ({alf_ratio[name + '_cpu']:.3f}x bare)")
    jail = jail_costs(args.jail_repeats)
    print(f"Jail (one per env stack with untrusted code): start {jail['start_ms']:.0f} ms "
          f"(median; min {jail['start_ms_min']:.0f} ms), resident memory {jail['rss_mb']:.1f} MB")
    load_end = os.getloadavg()
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)

    print(json.dumps({
        "bench": "step_overhead", "bare_us_per_step": r(best["bare"]),
        "trusted_us_per_step": r(best["trusted"]), "untrusted_us_per_step": r(best["untrusted"]),
        "ratio": r(best["trusted"] / best["bare"]),
        "ratio_untrusted": r(best["untrusted"] / best["bare"]),
        "ratio_cpu": r(cpu["trusted"] / cpu["bare"]),
        "ratio_untrusted_cpu": r(cpu["untrusted"] / cpu["bare"]),
        "alfworld_steps_per_s": None if alf is None else {k: round(v, 1) for k, v in alf["steps_per_s"].items()},
        "alfworld_ratio_trusted": r(alf_ratio.get("trusted")),
        "alfworld_ratio_untrusted": r(alf_ratio.get("untrusted")),
        "alfworld_ratio_trusted_cpu": r(alf_ratio.get("trusted_cpu")),
        "alfworld_ratio_untrusted_cpu": r(alf_ratio.get("untrusted_cpu")),
        "jail_start_ms": r(jail["start_ms"]), "jail_rss_mb": r(jail["rss_mb"]),
        "loadavg_start": [round(x, 2) for x in load_start], "loadavg_end": [round(x, 2) for x in load_end]}))


if __name__ == "__main__":
    main()
