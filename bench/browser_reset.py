"""Browser reset cost: envh's reset (a fresh context on a shared Chromium) against a fresh
browser per episode, on the same MiniWoB++ tasks, measured in the same run.

The baseline is a fresh Playwright ``chromium.launch`` + page per episode doing the same
task load and the same accessibility-tree read, then closing the browser: what a
per-episode relaunch costs (BrowserGym's ``gym.make`` + ``reset`` relaunches the same way,
but ``browsergym-core`` pins playwright==1.44 and cannot be installed beside this stack).

envh is measured in three modes: the next episode's context made ahead with its task page
preloaded (``spare.py``: the reset only seeds and starts the episode), made ahead with a
blank page, and made at reset. Each in an episode loop (reset, then a few steps, each after
some policy time: what a rollout does; the next episode's context is made during that time)
and back to back (reset after reset, no policy time: the spare is still being made when it
is needed). Making the context ahead moves work off the reset; it does not reduce the
browser's total work. Also reported: steps per second, and memory (PSS) per live env.

    python bench/browser_reset.py [--tasks click-button,enter-text] [--episodes 12] [--think 0.5]

Per task and class: mean, p50 and p90 reset time, and the ratio to the baseline's mean.
The last line is one JSON object; ``ratio`` = envh reset time in the episode loop with the
page preloaded / baseline reset time (means, averaged over the tasks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any


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


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"mean": statistics.fmean(times), "p50": statistics.median(times),
            "p90": ordered[int(0.9 * (len(ordered) - 1))], "n": len(times)}


MODES = {"preloaded": (True, True), "blank spare": (True, False), "at reset": (False, False)}


def envh_figures(task: str, episodes: int, steps: int, think: float, mode: str) -> dict[str, Any]:
    """Reset latency in an episode loop (reset, then ``steps`` hovers each after ``think``
    seconds of policy time) and back to back (reset after reset: no time to make a spare)."""
    from envh import Action, TaskRef
    from envh_webarena.axtree import find_bid
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    runtime = shared_runtime()
    runtime.make_ahead, runtime.preload = MODES[mode]
    ref = TaskRef(suite="miniwob", instance_id=task)
    env = MiniwobEnv(tasks=[task], max_steps=None)
    for seed in range(3):
        env.reset(task=ref, seed=seed)
    hits0, preloads0 = runtime.spare_hits, runtime.preload_hits
    in_loop, step_times = [], []
    for seed in range(episodes):
        time.sleep(think)  # the policy's last turn of the previous episode
        start = time.perf_counter()
        obs = env.reset(task=ref, seed=seed).observation
        in_loop.append(time.perf_counter() - start)
        bid = find_bid(obs.text, "button") if "button" in obs.text else None
        for _ in range(steps):
            time.sleep(think)
            start = time.perf_counter()
            env.step(Action(tool="hover", args={"bid": bid}) if bid else Action(tool="noop", args={}))
            step_times.append(time.perf_counter() - start)
    back_to_back = []
    for seed in range(episodes):
        start = time.perf_counter()
        env.reset(task=ref, seed=seed)
        back_to_back.append(time.perf_counter() - start)
    hits, preloads = runtime.spare_hits - hits0, runtime.preload_hits - preloads0
    env.close()
    return {"episode_loop": _summary(in_loop), "back_to_back": _summary(back_to_back),
            "steps_per_s": len(step_times) / sum(step_times) if step_times else 0.0,
            "spare_hits": hits, "preload_hits": preloads, "resets": 2 * episodes}


def memory_figures(task: str, live: int) -> dict[str, float]:
    """Memory (PSS) per live env on the shared browser."""
    from envh import TaskRef
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    ref = TaskRef(suite="miniwob", instance_id=task)
    first = MiniwobEnv(tasks=[task])
    first.reset(task=ref, seed=0)
    pgid = shared_runtime().pid
    browser0, py0 = group_rss_mb(pgid), self_rss_mb()  # type: ignore[arg-type]
    envs = [MiniwobEnv(tasks=[task]) for _ in range(live)]
    for i, e in enumerate(envs):
        e.reset(task=ref, seed=i)
    browser1, py1 = group_rss_mb(pgid), self_rss_mb()  # type: ignore[arg-type]
    for e in [first, *envs]:
        e.close()
    return {"rss_per_live_env_mb": (browser1 - browser0 + py1 - py0) / live, "shared_browser_rss_mb": browser0}


def baseline_figures(task: str, episodes: int) -> dict[str, float]:
    """A fresh Playwright launch per episode (runs before envh's runtime starts: two sync
    Playwright drivers cannot share a thread)."""
    from envh_webarena.axtree import snapshot
    from envh_webarena.miniwob import registered_tasks, start_task, task_server
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
            start_task(page, task, seed, "bench")
            snapshot(page, page.context.new_cdp_session(page), max_chars=6000)
            elapsed = time.perf_counter() - start
            rss.append(children_rss_mb())
            browser.close()
            if seed:  # the first launch warms the disk cache
                times.append(elapsed)
    return {**_summary(times), "rss_per_live_env_mb": statistics.median(rss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="click-button,enter-text,click-checkboxes,flight.AA")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--baseline-episodes", type=int, default=6)
    parser.add_argument("--steps", type=int, default=2, help="policy steps per episode")
    parser.add_argument("--think", type=float, default=0.5, help="seconds of policy time before each action")
    parser.add_argument("--live", type=int, default=4)
    args = parser.parse_args()
    load0 = os.getloadavg()[0]
    tasks = args.tasks.split(",")
    bases = {task: baseline_figures(task, args.baseline_episodes) for task in tasks}
    figs = {task: {mode: envh_figures(task, args.episodes, args.steps, args.think, mode) for mode in MODES}
            for task in tasks}
    mem = memory_figures(tasks[0], args.live)
    base_mem = bases[tasks[0]]["rss_per_live_env_mb"]
    load1 = os.getloadavg()[0]

    def ratio(task: str, mode: str, kind: str) -> float:
        return figs[task][mode][kind]["mean"] / bases[task]["mean"]

    print(f"load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} CPUs; episode loop: reset, then "
          f"{args.steps} steps, {args.think:g} s of policy time before each action")
    print(f"{'task':18} {'class':40} {'mean':>7} {'p50':>7} {'p90':>7}  ratio(mean)")
    for task in tasks:
        base = bases[task]
        lines = [("baseline: launch per episode", base)]
        for mode in MODES:
            lines += [(f"envh, {mode}, episode loop", figs[task][mode]["episode_loop"]),
                      (f"envh, {mode}, back to back", figs[task][mode]["back_to_back"])]
        for label, fig in lines:
            print(f"{task:18} {label:40} {fig['mean']:6.3f}s {fig['p50']:6.3f}s {fig['p90']:6.3f}s"
                  f"  {fig['mean'] / base['mean']:.3f}")
    for mode in MODES:
        hits = sum(figs[t][mode]["spare_hits"] for t in tasks)
        preloads = sum(figs[t][mode]["preload_hits"] for t in tasks)
        resets = sum(figs[t][mode]["resets"] for t in tasks)
        print(f"{mode}: spare contexts taken {hits}/{resets} resets, preloaded pages {preloads}/{resets}")
    print("steps/s (hover + observation), preloaded: "
          + ", ".join(f"{t} {figs[t]['preloaded']['steps_per_s']:.1f}" for t in tasks))
    print(f"PSS per live env: envh {mem['rss_per_live_env_mb']:.0f} MB (+ {mem['shared_browser_rss_mb']:.0f} MB "
          f"shared browser), baseline {base_mem:.0f} MB")
    loop = [ratio(t, "preloaded", "episode_loop") for t in tasks]
    print(json.dumps({
        "ratio": round(statistics.fmean(loop), 4), "ratio_worst_task": round(max(loop), 4),
        "ratio_back_to_back": round(statistics.fmean(ratio(t, "preloaded", "back_to_back") for t in tasks), 4),
        "ratio_blank_spare": round(statistics.fmean(ratio(t, "blank spare", "episode_loop") for t in tasks), 4),
        "ratio_context_at_reset": round(statistics.fmean(ratio(t, "at reset", "episode_loop") for t in tasks), 4),
        "baseline": "playwright-launch-per-episode",
        "per_task": {t: {"baseline_mean_s": round(bases[t]["mean"], 4),
                         **{f"{mode}_{kind}_ratio": round(ratio(t, mode, kind), 4)
                            for mode in MODES for kind in ("episode_loop", "back_to_back")},
                         "preloaded_episode_loop_p50_s": round(figs[t]["preloaded"]["episode_loop"]["p50"], 4),
                         "preloaded_episode_loop_p90_s": round(figs[t]["preloaded"]["episode_loop"]["p90"], 4)}
                     for t in tasks},
        "steps_per_s": round(statistics.fmean(figs[t]["preloaded"]["steps_per_s"] for t in tasks), 2),
        "pss_per_live_env_mb": round(mem["rss_per_live_env_mb"], 1),
        "baseline_pss_per_env_mb": round(base_mem, 1),
        "load_average": [round(load0, 1), round(load1, 1)]}))


if __name__ == "__main__":
    main()
