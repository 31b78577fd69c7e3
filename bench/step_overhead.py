"""µs per step of bare Toy24 vs Toy24 under stage + contract (untrusted code, all three
hooks) + budget, measured in the same run (interleaved, best of several repeats).

Last line: JSON with ``ratio`` = stack µs/step ÷ bare µs/step.
"""

from __future__ import annotations

import argparse
import json
import time

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
CODE_STATE = CODE.replace('return observation.text + " (step "',
                          'return observation.text + " (" + str(len(state["numbers"])) + " numbers, step "')
ACTIONS = [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}), Action(tool="reset")]


def stack(code: str) -> dict:
    return {"bridge": "toy24", "layers": [
        {"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 2, "j": 3, "op": "add"}}]},
        {"kind": "contract", "code": code},
        {"kind": "budget", "max_steps": 10**9}]}


def us_per_step(spec: dict, steps: int) -> float:
    env = make(spec)
    env.reset(task=TASK, seed=0)
    a, b = ACTIONS
    t0 = time.perf_counter()
    for _ in range(steps // 2):
        env.step(a)
        env.step(b)
    elapsed = time.perf_counter() - t0
    env.close()
    return elapsed / steps * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    specs = {"bare": {"bridge": "toy24"}, "stack": stack(CODE), "stack_reading_state": stack(CODE_STATE)}
    best = {k: float("inf") for k in specs}
    for _ in range(args.repeats):  # interleave so machine noise hits all variants alike
        for name, spec in specs.items():
            best[name] = min(best[name], us_per_step(spec, args.steps))
    for name, us in best.items():
        print(f"{name:>22}: {us:7.2f} µs/step  ({us / best['bare']:.2f}x bare)")
    print(json.dumps({
        "bench": "step_overhead", "bare_us_per_step": round(best["bare"], 3),
        "stack_us_per_step": round(best["stack"], 3),
        "stack_reading_state_us_per_step": round(best["stack_reading_state"], 3),
        "ratio": round(best["stack"] / best["bare"], 3),
        "ratio_reading_state": round(best["stack_reading_state"] / best["bare"], 3)}))


if __name__ == "__main__":
    main()
