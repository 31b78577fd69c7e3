"""ALFWorld on the real TextWorld engine: what envh's layers and executors cost.

Measured in one run on games built by envh-alfworld's builder (one per task type):

* steps/s of the bare bridge vs the bridge under stage + contract + budget (each game's
  walkthrough played by both back to back, best of several repeats per game);
* episodes/s of a process pool of 2 workers vs inline (scripted walkthroughs; skipped with
  ``null`` figures when ``envh.rollout`` is not installed);
* resident memory of one worker after 10 vs after 200 resets (cycling games, replacing the
  env every 20 resets like a reused worker does): the engine must not leak.

Last line: JSON with ``ratio`` = stacked steps/s ÷ bare steps/s and ``mem_growth_mb``.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from envh import Action, grant, make

CONTRACT = '''
def filter_action(action, state, memo):
    memo["n"] = memo.get("n", 0) + 1

def filter_observation(observation, state, memo):
    return observation.text + " [step " + str(memo.get("n", 0)) + "]"
'''


def build(out: Path) -> list:
    from envh_alfworld.builder import build_games
    from envh_alfworld.sampling import sample_rooms

    return build_games(sample_rooms(2024, 6), out)


def spec(root: Path, stacked: bool) -> dict:
    layers = [{"kind": "stage", "actions": [{"tool": "do", "args": {"command": "look"}}]},
              {"kind": "contract", "code": CONTRACT},
              {"kind": "budget", "max_steps": 10**6}] if stacked else []
    return {"bridge": "alfworld", "config": {"data_path": str(root), "max_steps": None}, "layers": layers}


def episode_s(env, game) -> float:
    """Seconds spent in step() playing ``game``'s walkthrough once (reset not timed)."""
    env.reset(task=game.task, seed=0)
    actions = [Action(tool="do", args={"command": c}) for c in game.walkthrough]
    t0 = time.perf_counter()
    for action in actions:
        env.step(action)
    return time.perf_counter() - t0


def steps_per_s(root: Path, games: list, repeats: int) -> dict[str, float]:
    """Bare and stacked play the same episodes back to back (so machine load hits both
    alike); each game's best time over ``repeats`` counts."""
    best = {name: [float("inf")] * len(games) for name in ("bare", "stacked")}
    with make(spec(root, False)) as bare, make(spec(root, True)) as stacked:
        for _ in range(repeats):
            for i, game in enumerate(games):
                for name, env in (("bare", bare), ("stacked", stacked)):
                    best[name][i] = min(best[name][i], episode_s(env, game))
    steps = sum(len(g.walkthrough) for g in games)
    return {name: steps / sum(times) for name, times in best.items()}


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(root: Path, games: list, resets: int) -> dict[int, float]:
    from envh_alfworld.bridge import AlfworldEnv

    marks: dict[int, float] = {}
    env = AlfworldEnv(data_path=str(root))
    for i in range(1, resets + 1):
        if i % 20 == 0:
            env.close()
            env = AlfworldEnv(data_path=str(root))
        game = games[i % len(games)]
        env.reset(task=game.task, seed=i)
        env.step(Action(tool="do", args={"command": game.walkthrough[0]}))
        if i in (10, resets):
            marks[i] = rss_mb()
    env.close()
    return marks


def executors(root: Path, games: list, episodes: int) -> dict[str, float] | None:
    try:
        from envh.rollout.executors.inline import InlineExecutor
        from envh.rollout.executors.pool import PoolExecutor
        from envh.rollout.trajectory import EpisodeRequest
        from envh.spec import spec_id
    except ImportError:
        return None
    script = Path(root) / "walkthroughs.json"
    script.write_text(json.dumps({g.task.instance_id: [{"tool": "do", "args": {"command": c}} for c in g.walkthrough]
                                  for g in games}))
    data = spec(root, False)
    requests = [EpisodeRequest(key=f"e{i}", spec=data, spec_id=spec_id(data), task=games[i % len(games)].task,
                               seed=i, policy=f"scripted:{script}") for i in range(episodes)]
    out = {}
    for name, executor in (("inline", InlineExecutor()), ("pool2", PoolExecutor(workers=2))):
        with executor:
            list(executor.run(requests[:2]))  # warm up: imports, engines
            t0 = time.perf_counter()
            done = [t for t in executor.run(requests) if t.final]
            out[name] = len(done) / (time.perf_counter() - t0)
            assert all(t.verdict and t.verdict.success for t in done), [t.error for t in done if not t.verdict]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=5, help="plays of each game per configuration")
    p.add_argument("--pool-episodes", type=int, default=12)
    p.add_argument("--resets", type=int, default=200)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="envh-alfworld-bench-") as tmp:
        root = Path(tmp)
        grant(root)  # the games the specs name: this process wrote them
        games = build(root)
        best = steps_per_s(root, games, args.repeats)
        ratio = best["stacked"] / best["bare"]
        print(f"steps/s bare {best['bare']:.0f}  stacked (stage+contract+budget) {best['stacked']:.0f}  "
              f"ratio {ratio:.3f}")
        pool = executors(root, games, args.pool_episodes)
        pool_ratio = None if pool is None else pool["pool2"] / pool["inline"]
        if pool is None:
            print("executors: envh.rollout not available")
        else:
            print(f"episodes/s inline {pool['inline']:.1f}  pool(2) {pool['pool2']:.1f}  ratio {pool_ratio:.2f}")
        marks = memory(root, games, args.resets)
        growth = marks[args.resets] - marks[10]
        print(f"RSS after 10 resets {marks[10]:.1f} MB, after {args.resets} {marks[args.resets]:.1f} MB "
              f"(growth {growth:+.1f} MB)")
        print(json.dumps({"ratio": round(ratio, 4), "steps_per_s_bare": round(best["bare"], 1),
                          "steps_per_s_stacked": round(best["stacked"], 1),
                          "pool2_over_inline": None if pool_ratio is None else round(pool_ratio, 3),
                          "mem_growth_mb": round(growth, 2), "resets": args.resets}))


if __name__ == "__main__":
    main()
