"""Episodes/s of Toy24 with a scripted policy: inline, pool(2), ray(2), and the baseline of
one fresh Python subprocess per episode (how the reference implementation isolates
episodes), printed as ratios to that baseline. Also the pool's IPC overhead per step,
and the store's bytes per step with and without model token ids.

Full recording is on: every executor's trajectories are appended to a trajectory store
(SQLite, fsynced) as they arrive, with base-bridge taps and layer effects, and the pool
runs at its default isolation (own namespaces when root). The baseline only plays (it
records nothing), which favours it. Pool and Ray figures include starting their workers
(not the Ray cluster itself).
Last line: JSON with ``ratio`` = pool(2) episodes/s ÷ fresh-subprocess episodes/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import envh
from envh.bridges.toy24 import CURATED
from envh.bridges.toy24_solver import solve
from envh.rollout.executors.inline import InlineExecutor
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.plan import build_plan
from envh.rollout.store import TrajectoryStore

SPEC = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 20}]}
ONE_EPISODE = """
import sys, json
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import request_from_data
t = run_episode(request_from_data(json.loads(sys.argv[1])))
assert t.success, t
"""


def script_file(folder: Path) -> str:
    """A per-task script: the solver's plan for every medium puzzle, then stop()."""
    script = {}
    for inst in CURATED["medium"]:
        plan = solve([int(x) for x in inst.split(",")])
        script[inst] = [{"tool": "combine", "args": {"i": i, "j": j, "op": op}} for i, j, op in plan]
        script[inst].append({"tool": "stop", "args": {}})
    path = folder / "script.json"
    path.write_text(json.dumps(script))
    return str(path)


def requests(policy: str, n: int, tag: str) -> list:
    tasks = [envh.TaskRef(suite="toy24", split="medium", instance_id=i) for i in CURATED["medium"]]
    k = max(1, n // len(tasks))
    return [envh.rollout.trajectory.EpisodeRequest(**{**_fields(r), "key": f"{tag}:{r.key}"})
            for r in build_plan(SPEC, policy=policy, k=k, tasks=tasks)]


def _fields(request) -> dict:
    import attrs

    return attrs.asdict(request, recurse=False)


def timed(executor, reqs, store) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = []
    for t in executor.run(reqs):
        store.append(t)
        if t.final:
            out.append(t)
    elapsed = time.perf_counter() - t0
    assert len(out) == len(reqs) and all(t.success for t in out), [t.error for t in out if not t.success][:3]
    return len(out) / elapsed, out


def fresh_subprocess(reqs) -> float:
    from envh.rollout.trajectory import request_to_data

    t0 = time.perf_counter()
    for request in reqs:
        subprocess.run([sys.executable, "-c", ONE_EPISODE, json.dumps(request_to_data(request))], check=True)
    return len(reqs) / (time.perf_counter() - t0)


PROMPT_TOKENS, COMPLETION_TOKENS = 400, 24  # a short chat turn; the ids are the model's, not text


def store_bytes_per_step(trajectories: list, folder: Path) -> tuple[float, float]:
    """Bytes per step of the SQLite store for these trajectories as recorded, and for the
    same trajectories with a model turn per step carrying token ids and logprobs (as the
    local and vLLM policies record them): what keeping trainers off retokenisation costs."""
    import attrs
    from envh.rollout.trajectory import ModelTurn

    rng = random.Random(0)
    steps = sum(len(t.steps) for t in trajectories)

    def with_tokens(t):
        return attrs.evolve(t, steps=tuple(attrs.evolve(s, turn=ModelTurn(
            text=str(s.raw), prompt_token_ids=[rng.randrange(49152) for _ in range(PROMPT_TOKENS)],
            completion_token_ids=[rng.randrange(49152) for _ in range(COMPLETION_TOKENS)],
            logprobs=[-rng.random() * 4 for _ in range(COMPLETION_TOKENS)])) for s in t.steps))

    sizes = []
    for name, batch in (("plain", trajectories), ("tokens", [with_tokens(t) for t in trajectories])):
        path = folder / f"bytes-{name}"
        with TrajectoryStore(path) as store:
            for t in batch:
                store.append(t)
            store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sizes.append(sum(f.stat().st_size for f in path.iterdir()) / steps)
    return sizes[0], sizes[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=2000, help="episodes per executor")
    parser.add_argument("--fresh", type=int, default=20, help="episodes for the fresh-subprocess baseline")
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    import envh.rollout.trajectory  # noqa: F401 - used through the envh namespace above

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)  # workers may run as another user
        policy = f"scripted:{script_file(Path(tmp))}"
        store = TrajectoryStore(Path(tmp) / "store")
        results: dict[str, float] = {}
        results["fresh"] = fresh_subprocess(requests(policy, args.fresh, "fresh"))
        with InlineExecutor() as inline:
            list(inline.run(requests(policy, 10, "warm")))
            results["inline"], inline_out = timed(inline, requests(policy, args.episodes, "inline"), store)
        with PoolExecutor(2) as pool:
            isolation = pool.isolation
            results["pool2"], _ = timed(pool, requests(policy, args.episodes, "pool2"), store)
            rtt = pool.ping(2000)
        with PoolExecutor(1) as pool1:
            list(pool1.run(requests(policy, 10, "warm")))
            pool1_eps, _ = timed(pool1, requests(policy, args.episodes // 2, "pool1"), store)
        if not args.no_ray:
            from envh.rollout.executors.ray import RayExecutor

            ray_exec = RayExecutor(2)
            try:
                results["ray2"], _ = timed(ray_exec, requests(policy, args.episodes, "ray2"), store)
            finally:
                ray_exec.close()
                import ray

                ray.shutdown()
        bytes_plain, bytes_tokens = store_bytes_per_step(inline_out[:200], Path(tmp))
        store.close()
    steps = sum(len(t.steps) for t in inline_out) / len(inline_out)
    ipc_per_step_us = max(0.0, (1 / pool1_eps - 1 / results["inline"]) / steps * 1e6)
    base = results["fresh"]
    print(f"{'executor':<10} {'episodes/s':>12} {'× fresh':>9}")
    for name, eps in results.items():
        print(f"{name:<10} {eps:>12.1f} {eps / base:>9.1f}")
    print(f"mean steps/episode {steps:.1f}; pool IPC: round trip {rtt * 1e6:.0f} µs, "
          f"overhead per step {ipc_per_step_us:.0f} µs (pool(1) vs inline, per episode ÷ steps); "
          f"pool isolation: {isolation}")
    print(f"store: {bytes_plain:.0f} bytes/step as recorded here; {bytes_tokens:.0f} bytes/step with a model "
          f"turn of {PROMPT_TOKENS} prompt + {COMPLETION_TOKENS} completion token ids and logprobs per step")
    print(json.dumps({"ratio": round(results["pool2"] / base, 2),
                      "store_bytes_per_step": round(bytes_plain, 1),
                      "store_bytes_per_step_with_token_ids": round(bytes_tokens, 1), "isolation": isolation,
                      "episodes_per_s": {k: round(v, 2) for k, v in results.items()},
                      "ratios": {k: round(v / base, 2) for k, v in results.items()},
                      "ipc_round_trip_us": round(rtt * 1e6, 1), "ipc_per_step_us": round(ipc_per_step_us, 1),
                      "mean_steps": round(steps, 2), "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
