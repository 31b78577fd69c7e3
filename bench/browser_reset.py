"""Browser reset cost: envh's reset (a fresh context on a shared Chromium) against a fresh
browser per episode, on the same MiniWoB++ task, measured in the same run.

The baseline is a fresh Playwright ``chromium.launch`` + page per episode doing the same
task load and the same accessibility-tree read, then closing the browser: what a
per-episode relaunch costs (BrowserGym's ``gym.make`` + ``reset`` relaunches the same way,
but ``browsergym-core`` pins playwright==1.44 and cannot be installed beside this stack).
Also reported: steps per second, and memory (PSS) per live env (envh: the growth of the
shared browser and the process per extra live episode; baseline: one browser with a page).

    python bench/browser_reset.py [--episodes 20] [--baseline-episodes 8] [--task click-button]

The last line is one JSON object; ``ratio`` = envh reset time / baseline reset time (mean).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def group_rss_mb(pgid: int) -> float:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) != pgid:
                    continue
            total += pss_kb(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return total / 1024


def pss_kb(pid: int) -> int:
    """Proportional set size: shared pages (Chromium's libraries) counted once overall."""
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def self_rss_mb() -> float:
    return pss_kb(os.getpid()) / 1024


def children_rss_mb() -> float:
    """RSS of every process whose parent chain reaches this one (Playwright's driver and
    the browsers it launched)."""
    parents: dict[int, int] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                    parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    me, total = os.getpid(), 0.0
    for pid in parents:
        p, seen = pid, 0
        while p in parents and p != me and seen < 50:
            p, seen = parents[p], seen + 1
        if p == me and pid != me:
            try:
                total += pss_kb(pid) / 1024
            except OSError:
                continue
    return total


def envh_figures(task: str, episodes: int, steps: int, live: int) -> dict[str, float]:
    from envh import Action, TaskRef
    from envh_webarena.axtree import find_bid
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    ref = TaskRef(suite="miniwob", instance_id=task)
    env = MiniwobEnv(tasks=[task], max_steps=None)
    for seed in range(3):
        env.reset(task=ref, seed=seed)
    times = []
    for seed in range(episodes):
        start = time.perf_counter()
        env.reset(task=ref, seed=seed)
        times.append(time.perf_counter() - start)
    obs = env.reset(task=ref, seed=0).observation
    bid = find_bid(obs.text, "button")
    start = time.perf_counter()
    for _ in range(steps):
        env.step(Action(tool="hover", args={"bid": bid}))
    steps_per_s = steps / (time.perf_counter() - start)
    env.close()
    # memory per live env: open `live` envs with an episode each on the shared browser
    pgid = shared_runtime().pid
    browser0, py0 = group_rss_mb(pgid), self_rss_mb()  # type: ignore[arg-type]
    envs = [MiniwobEnv(tasks=[task]) for _ in range(live)]
    for i, e in enumerate(envs):
        e.reset(task=ref, seed=i)
    browser1, py1 = group_rss_mb(pgid), self_rss_mb()  # type: ignore[arg-type]
    for e in envs:
        e.close()
    return {"reset_mean_s": statistics.fmean(times), "reset_median_s": statistics.median(times),
            "reset_p90_s": sorted(times)[int(0.9 * (len(times) - 1))], "steps_per_s": steps_per_s,
            "rss_per_live_env_mb": (browser1 - browser0 + py1 - py0) / live,
            "shared_browser_rss_mb": browser0}


def baseline_figures(task: str, episodes: int) -> dict[str, float]:
    from envh_webarena.axtree import snapshot
    from envh_webarena.miniwob import _HIDE_CSS, _START_JS, registered_tasks, task_server
    from envh_webarena.runtime import CHROMIUM_ARGS, chromium_path
    from playwright.sync_api import sync_playwright

    url = f"{task_server().url}/{registered_tasks()[task]}"
    times, rss = [], []
    with sync_playwright() as pw:
        for seed in range(episodes + 1):
            start = time.perf_counter()
            browser = pw.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
            page = browser.new_page()
            page.goto(url, wait_until="load")
            page.evaluate(_START_JS, [seed, _HIDE_CSS])
            page.evaluate("() => core.getUtterance()")
            snapshot(page, page.context.new_cdp_session(page), max_chars=6000)
            elapsed = time.perf_counter() - start
            rss.append(children_rss_mb())
            browser.close()
            if seed:  # the first launch warms the disk cache
                times.append(elapsed)
    return {"reset_mean_s": statistics.fmean(times), "reset_median_s": statistics.median(times),
            "reset_p90_s": sorted(times)[int(0.9 * (len(times) - 1))],
            "rss_per_live_env_mb": statistics.median(rss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="click-button")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--baseline-episodes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--live", type=int, default=4)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    base = baseline_figures(args.task, args.baseline_episodes)
    ours = envh_figures(args.task, args.episodes, args.steps, args.live)
    print(f"task miniwob/{args.task}, load average {load:.1f} on {os.cpu_count()} CPUs")
    print("class                         reset mean   median    p90     PSS/live env")
    print(f"baseline: launch per episode  {base['reset_mean_s']:8.3f}s {base['reset_median_s']:8.3f}s "
          f"{base['reset_p90_s']:7.3f}s {base['rss_per_live_env_mb']:8.0f} MB")
    print(f"envh: context per episode     {ours['reset_mean_s']:8.3f}s {ours['reset_median_s']:8.3f}s "
          f"{ours['reset_p90_s']:7.3f}s {ours['rss_per_live_env_mb']:8.0f} MB "
          f"(+ {ours['shared_browser_rss_mb']:.0f} MB shared browser)")
    print(f"envh steps/s (hover + observation): {ours['steps_per_s']:.1f}")
    ratio = ours["reset_mean_s"] / base["reset_mean_s"]
    print(json.dumps({"ratio": round(ratio, 4), "baseline": "playwright-launch-per-episode",
                      "envh_reset_mean_s": round(ours["reset_mean_s"], 4),
                      "baseline_reset_mean_s": round(base["reset_mean_s"], 4),
                      "steps_per_s": round(ours["steps_per_s"], 2),
                      "pss_per_live_env_mb": round(ours["rss_per_live_env_mb"], 1),
                      "baseline_pss_per_env_mb": round(base["rss_per_live_env_mb"], 1),
                      "load_average": round(load, 1)}))


if __name__ == "__main__":
    main()
