"""Browser reset cost: envh's reset (a fresh context on a shared Chromium) against
BrowserGym's ``gym.make`` + ``reset`` per episode, on the same MiniWoB++ tasks, measured in
the same run.

Baselines, each per task:

- BrowserGym 0.14.3 as it ships (``bench/browsergym_baseline.py``: ``gym.make`` + ``reset``
  per episode, ``close`` untimed; its reset launches two browsers, the env's and the chat's,
  and MiniWoB tasks set Playwright's ``slow_mo`` to 100 ms);
- the same with ``slow_mo=0`` (its reset's work without the deliberate pauses): the stricter
  baseline and the headline's;
- a fresh Playwright ``chromium.launch`` + page per episode doing envh's task load, start and
  tree read, then closing the browser.

``browsergym-core`` pins playwright==1.44, which cannot sit beside this stack, so its
baseline runs in a virtualenv of its own, made on first use under
``~/.cache/envh/bench/browsergym-0.14.3/`` (pip from the package index; ``--baseline-python``
names an existing one) and started in a network namespace of its own (``unshare --net``),
where it serves the same wheel's task pages on 127.0.0.1: its Chromium reaches nothing else.
It uses this machine's Chromium (``envh_webarena.runtime.chromium_path()``), no download.

envh is measured in three modes: the next episode's context made ahead with its task page
preloaded (``spare.py``: the reset only seeds and starts the episode), made ahead with a
blank page, and made at reset. Each in an episode loop (reset, then a few steps, each after
some policy time: what a rollout does; the next episode's context is made during that time)
and back to back (reset after reset, no policy time: the spare is still being made when it
is needed). Making the context ahead moves work off the reset; it does not reduce the
browser's total work. Also reported: steps per second, and memory (PSS) per live env
against BrowserGym's per env.

    python bench/browser_reset.py [--tasks click-button,enter-text] [--episodes 12] [--think 0.5]

Tasks are measured one after the other, each as the launch baseline, BrowserGym, then
envh's classes, so a task's figures are minutes apart at most; the load average is printed
per task. Per task and class: mean, p50 and p90 reset time, and the ratio of means to each
baseline.
The last line is one JSON object; ``ratio`` = envh reset time in the episode loop with the
page preloaded / BrowserGym's with ``slow_mo=0`` (means, averaged over the tasks).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

BROWSERGYM_PINS = ("browsergym-core==0.14.3", "browsergym-miniwob==0.14.3")
BASELINE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browsergym_baseline.py")


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
    """PSS of every process whose parent chain reaches this one (Playwright's driver and
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
    p90 = statistics.quantiles(times, n=10, method="inclusive")[-1] if len(times) > 1 else times[0]
    return {"mean": statistics.fmean(times), "p50": statistics.median(times), "p90": p90, "n": len(times)}


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


def baseline_venv() -> str:
    """The BrowserGym virtualenv's python, made (once, under a lock) with this interpreter's
    base Python and the pinned packages."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    root = os.path.join(cache, "envh", "bench", "browsergym-0.14.3")
    python, marker = os.path.join(root, "bin", "python"), os.path.join(root, ".envh-installed")
    want = "\n".join(BROWSERGYM_PINS)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    with open(root + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(marker) and open(marker, encoding="utf-8").read() == want:
            return python
        base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
        shutil.rmtree(root, ignore_errors=True)
        print(f"making the BrowserGym baseline's virtualenv {root} ({', '.join(BROWSERGYM_PINS)})", flush=True)
        subprocess.run([base if os.path.exists(base) else sys.executable, "-m", "venv", root], check=True)
        pip = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              *BROWSERGYM_PINS], capture_output=True, text=True)
        if pip.returncode:
            tail = "\n".join((pip.stderr or pip.stdout).strip().splitlines()[-6:])
            shutil.rmtree(root, ignore_errors=True)
            sys.exit(f"browser_reset: could not install {' '.join(BROWSERGYM_PINS)} into {root} (is the package "
                     f"index reachable?); pass --baseline-python PATH to use a python that has them.\npip:\n{tail}")
        with open(marker, "w", encoding="utf-8") as f:
            f.write(want)
    return python


def browsergym_figures(python: str, tasks: list[str], episodes: int, live: int) -> dict[str, Any]:
    """BrowserGym's reset per task, both classes (bench/browsergym_baseline.py), in a network
    namespace of its own."""
    from envh_webarena.miniwob import html_dir, registered_tasks
    from envh_webarena.runtime import chromium_path

    pages = registered_tasks()
    netns = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
    cmd = [*netns, python, BASELINE_SCRIPT, "--html-dir", html_dir(), "--chromium", chromium_path(),
           *(f"--task={t}={pages[t]}" for t in tasks), "--episodes", str(episodes), "--live", str(live)]
    resets = len(tasks) * (episodes + 1) * 2 + live
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + 30 * resets)
    except subprocess.TimeoutExpired as exc:
        sys.exit(f"browser_reset: the BrowserGym baseline did not finish in {exc.timeout:.0f} s")
    if out.returncode:
        tail = "\n".join(out.stderr.strip().splitlines()[-15:])
        sys.exit(f"browser_reset: the BrowserGym baseline failed ({' '.join(cmd[:3])} ...):\n{tail}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


BASELINES = {"browsergym_slow_mo_0": "BrowserGym, slow_mo=0", "browsergym": "BrowserGym as shipped (slow_mo 100)",
             "launch": "Playwright launch per episode"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="click-button,enter-text,click-checkboxes,flight.AA")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--baseline-episodes", type=int, default=6)
    parser.add_argument("--steps", type=int, default=2, help="policy steps per episode")
    parser.add_argument("--think", type=float, default=0.5, help="seconds of policy time before each action")
    parser.add_argument("--live", type=int, default=4)
    parser.add_argument("--baseline-python", help="a python with " + " ".join(BROWSERGYM_PINS)
                        + " (default: a virtualenv made under ~/.cache/envh/bench/)")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    if not shutil.which("unshare"):
        sys.exit("browser_reset: `unshare` (util-linux) is needed to run the BrowserGym baseline in a network "
                 "namespace of its own")
    python = args.baseline_python or baseline_venv()
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        sys.exit(f"browser_reset: --baseline-python {python} is not an executable file")
    # task by task, baselines then envh, so that a task's figures are minutes apart at most
    # and the machine's load (these machines are shared) weighs on both alike
    launch: dict[str, Any] = {}
    gym: dict[str, Any] = {"times": {}, "frame_marking_timeouts": {}}
    figs: dict[str, Any] = {}
    load: dict[str, dict[str, float]] = {}
    for i, task in enumerate(tasks):
        load[task] = {"start": os.getloadavg()[0]}
        launch[task] = baseline_figures(task, args.baseline_episodes)
        one = browsergym_figures(python, [task], args.baseline_episodes, args.live if i == 0 else 0)
        load[task]["after_baselines"] = os.getloadavg()[0]
        gym["times"][task], gym["frame_marking_timeouts"][task] = one["times"][task], one["frame_marking_timeouts"][task]
        if i == 0:
            gym.update({k: one[k] for k in ("pss_per_env_mb", "pss_driver_mb", "versions")})
        figs[task] = {mode: envh_figures(task, args.episodes, args.steps, args.think, mode) for mode in MODES}
        load[task]["after_envh"] = os.getloadavg()[0]
    bases = {t: {"launch": launch[t], **{c: _summary(gym["times"][t][c]) for c in BASELINES if c != "launch"}}
             for t in tasks}
    mem = memory_figures(tasks[0], args.live)

    def ratio(task: str, mode: str, kind: str, base: str = "browsergym_slow_mo_0") -> float:
        return figs[task][mode][kind]["mean"] / bases[task][base]["mean"]

    print(f"load average on {os.cpu_count()} CPUs per task (start, after the baselines, after envh): "
          + "; ".join(f"{t} " + " -> ".join(f"{v:.1f}" for v in load[t].values()) for t in tasks)
          + f"; episode loop: reset, then {args.steps} steps, {args.think:g} s of policy time before each action")
    print(f"{'task':16} {'class':40} {'mean':>7} {'p50':>7} {'p90':>7}   ratio of means to: BG slow_mo=0 / BG / launch")
    for task in tasks:
        lines = [(BASELINES[b], bases[task][b]) for b in BASELINES]
        for mode in MODES:
            lines += [(f"envh, {mode}, episode loop", figs[task][mode]["episode_loop"]),
                      (f"envh, {mode}, back to back", figs[task][mode]["back_to_back"])]
        for label, fig in lines:
            rel = " / ".join(f"{fig['mean'] / bases[task][b]['mean']:.3f}" for b in BASELINES)
            print(f"{task:16} {label:40} {fig['mean']:6.3f}s {fig['p50']:6.3f}s {fig['p90']:6.3f}s   {rel}")
    for mode in MODES:
        hits = sum(figs[t][mode]["spare_hits"] for t in tasks)
        preloads = sum(figs[t][mode]["preload_hits"] for t in tasks)
        resets = sum(figs[t][mode]["resets"] for t in tasks)
        print(f"{mode}: spare contexts taken {hits}/{resets} resets, preloaded pages {preloads}/{resets}")
    missed = [f"{t} {mode} {kind.replace('_', ' ')} {ratio(t, mode, kind):.2f}" for t in tasks for mode in MODES
              for kind in ("episode_loop", "back_to_back") if ratio(t, mode, kind) > 0.2]
    print("BrowserGym resets that include its 1000 ms frame-marking timeout: " + ", ".join(
        f"{t} {c} {gym['frame_marking_timeouts'][t][c]}/{bases[t][c]['n']}" for t in tasks for c in BASELINES
        if c != "launch"))
    print("over the 0.2x target against BrowserGym slow_mo=0: " + ("; ".join(missed) or "none"))
    print("steps/s (hover + observation), preloaded: "
          + ", ".join(f"{t} {figs[t]['preloaded']['steps_per_s']:.1f}" for t in tasks))
    print(f"PSS per live env: envh {mem['rss_per_live_env_mb']:.0f} MB (+ {mem['shared_browser_rss_mb']:.0f} MB "
          f"shared browser), BrowserGym {gym['pss_per_env_mb']:.0f} MB (two browsers; + {gym['pss_driver_mb']:.0f} MB "
          f"driver), launch per episode {launch[tasks[0]]['rss_per_live_env_mb']:.0f} MB")
    loop = [ratio(t, "preloaded", "episode_loop") for t in tasks]

    def mean_ratio(mode: str, kind: str, base: str) -> float:
        return round(statistics.fmean(ratio(t, mode, kind, base) for t in tasks), 4)

    print(json.dumps({
        "ratio": round(statistics.fmean(loop), 4), "ratio_worst_task": round(max(loop), 4),
        "ratio_vs_browsergym_defaults": mean_ratio("preloaded", "episode_loop", "browsergym"),
        "ratio_vs_launch": mean_ratio("preloaded", "episode_loop", "launch"),
        "ratio_back_to_back": {b: mean_ratio("preloaded", "back_to_back", b) for b in BASELINES},
        "ratio_blank_spare": {b: mean_ratio("blank spare", "episode_loop", b) for b in BASELINES},
        "ratio_context_at_reset": {b: mean_ratio("at reset", "episode_loop", b) for b in BASELINES},
        "baseline": "browsergym-0.14.3 gym.make+reset per episode, slow_mo=0",
        "per_task": {t: {
            "baselines_s": {b: {k: round(v, 4) for k, v in bases[t][b].items() if k != "rss_per_live_env_mb"}
                            for b in BASELINES},
            "envh_s": {f"{mode}_{kind}": {k: round(v, 4) for k, v in figs[t][mode][kind].items()}
                       for mode in MODES for kind in ("episode_loop", "back_to_back")},
            "ratios": {f"{mode}_{kind}_vs_{b}": round(ratio(t, mode, kind, b), 4)
                       for mode in MODES for kind in ("episode_loop", "back_to_back") for b in BASELINES},
            "browsergym_frame_marking_timeouts": gym["frame_marking_timeouts"][t],
            "steps_per_s": round(figs[t]["preloaded"]["steps_per_s"], 2)} for t in tasks},
        "steps_per_s": round(statistics.fmean(figs[t]["preloaded"]["steps_per_s"] for t in tasks), 2),
        "pss_per_live_env_mb": round(mem["rss_per_live_env_mb"], 1),
        "shared_browser_pss_mb": round(mem["shared_browser_rss_mb"], 1),
        "browsergym_pss_per_env_mb": round(gym["pss_per_env_mb"], 1),
        "browsergym_driver_pss_mb": round(gym["pss_driver_mb"], 1),
        "launch_pss_per_env_mb": round(launch[tasks[0]]["rss_per_live_env_mb"], 1),
        "browsergym_versions": gym["versions"],
        "load_average": {t: {k: round(v, 1) for k, v in load[t].items()} for t in tasks}}))


if __name__ == "__main__":
    main()
