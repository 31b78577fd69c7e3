"""Memory over many MiniWoB resets on the shared browser: does a reset leave anything behind?

envh resets by closing the episode's browser context and opening a fresh one on the one
shared Chromium (a context made ahead each time, a step now and then). Played for
``--resets`` episodes after a warm-up, sampling every 10: the browser's summed resident
memory and process count, and this process's. The baseline, in the same run, is the same
loop with the leak the check exists for: each episode's session left open (its context and
renderer live on), for ``--leak-resets`` episodes.

Figures: the fitted growth per reset (MB) of the browser and of Python, the process count
first and last, for envh and for the leaking baseline. ``ratio`` is envh's browser growth
per reset over the leak's (0 is flat; a leak of its own shows as a ratio towards 1). The
suite keeps a short version of this check (``test_runtime.py``: 30 resets, the process
count and loose bounds); the slopes need the long run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from statistics import linear_regression

from envh import Action, TaskRef

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "envh-webarena" / "tests"))
from procgroup import group_pids  # noqa: E402

CLICK = TaskRef(suite="miniwob", instance_id="click-button")


def group_rss_mb(pgid: int) -> tuple[float, int]:
    """Resident memory (MB) and process count of a process group (the browser's)."""
    total, count = 0, 0
    for pid in group_pids(pgid):
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            count += 1
        except (OSError, ValueError):
            continue
    return total / 2**20, count


def self_rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def soak(resets: int, leak: bool) -> dict[str, float]:
    from envh_webarena.axtree import find_bid
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    env = MiniwobEnv(tasks=["click-button", "enter-text"])
    kept = []
    try:
        if leak:  # the defect the check exists for: an episode's session never closed
            close = BrowserSession.close
            BrowserSession.close = lambda self: kept.append(self)  # type: ignore[method-assign]
        for seed in range(10):  # warm-up: caches, the JIT, the task server
            env.reset(task=CLICK, seed=seed)
        pgid = shared_runtime().pid
        samples: list[tuple[int, float, int, float]] = []
        for seed in range(resets + 1):
            obs = env.reset(task=CLICK, seed=seed).observation
            if seed % 10 == 5:
                env.step(Action(tool="click", args={"bid": find_bid(obs.text, "button")}))
            if seed % 10 == 0:
                browser, procs = group_rss_mb(pgid)  # type: ignore[arg-type]
                samples.append((seed, browser, procs, self_rss_mb()))
    finally:
        if leak:
            BrowserSession.close = close  # type: ignore[method-assign]
            for session in kept:
                close(session)
        env.close()
    xs = [s[0] for s in samples]
    return {"browser_mb_per_reset": linear_regression(xs, [s[1] for s in samples]).slope,
            "python_mb_per_reset": linear_regression(xs, [s[3] for s in samples]).slope,
            "browser_mb_first": samples[0][1], "browser_mb_last": samples[-1][1],
            "processes_first": float(samples[0][2]), "processes_last": float(samples[-1][2])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resets", type=int, default=200)
    parser.add_argument("--leak-resets", type=int, default=30, help="episodes of the leaking baseline")
    args = parser.parse_args()
    envh = soak(args.resets, leak=False)
    leak = soak(args.leak_resets, leak=True)
    for name, figs in (("envh", envh), ("leaking baseline", leak)):
        print(f"{name}: browser {figs['browser_mb_first']:.0f} -> {figs['browser_mb_last']:.0f} MB "
              f"({figs['browser_mb_per_reset']:+.3f} MB/reset), {figs['processes_first']:.0f} -> "
              f"{figs['processes_last']:.0f} processes; python {figs['python_mb_per_reset']:+.3f} MB/reset")
    print(json.dumps({"resets": args.resets, **{f"envh_{k}": round(v, 4) for k, v in envh.items()},
                      **{f"leak_{k}": round(v, 4) for k, v in leak.items()},
                      "ratio": round(envh["browser_mb_per_reset"] / leak["browser_mb_per_reset"], 4)
                      if leak["browser_mb_per_reset"] > 0 else None}))


if __name__ == "__main__":
    main()
