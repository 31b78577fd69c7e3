"""The Ray executor on a real local Ray cluster (one per test session): same episodes as
in-process, real concurrency, killed and hung actors, time limits, no secrets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import envh
import pytest
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import EpisodeRequest
from envh.rollout.warm import Warm

ray = pytest.importorskip("ray")


def req(registry, key, policy, spec=None, **kw):
    spec = spec or {"bridge": "toy24"}
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    return EpisodeRequest(key=key, spec=data, spec_id=envh.spec_id(spec, registry), policy=policy, **kw)


def test_ray_plays_the_same_episodes_as_inline(registry, ray_executor):
    spec = {"bridge": "toy24", "layers": [
        {"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]},
        {"kind": "budget", "max_steps": 8}]}
    tasks = [envh.TaskRef(suite="toy24", split="medium", instance_id=i) for i in ("1,2,6,6", "2,3,6,13")]
    reqs = [req(registry, f"{p}/{t}", p, spec, task=t, seed=1) for t in tasks for p in ("solver", "fuzz:4")]
    warm = Warm(registry)
    try:
        inline = {r.key: run_episode(r, warm) for r in reqs}
    finally:
        warm.close()
    remote = {t.key: t for t in ray_executor.run(reqs)}
    assert set(remote) == set(inline)
    for key, a in inline.items():
        b = remote[key]
        assert b.final and b.worker != a.worker
        assert [(s.proposed, s.executed, s.observation) for s in a.steps] == \
               [(s.proposed, s.executed, s.observation) for s in b.steps]
        assert (a.verdict, a.error_class, a.stop, a.spec_id) == (b.verdict, b.error_class, b.stop, b.spec_id)


def test_ray_runs_episodes_concurrently_without_secrets(registry, ray_executor):
    list(ray_executor.run([req(registry, "warmup", "solver")]))
    t0 = time.monotonic()
    out = list(ray_executor.run([req(registry, f"s{i}", "sleepy:0.8") for i in range(4)]))
    elapsed = time.monotonic() - t0
    assert all(t.error_class is None for t in out) and elapsed < 2.6, elapsed
    (probe,) = ray_executor.run([req(registry, "probe", "envprobe:FAKE_RAY_API_KEY,PATH")])
    assert probe.steps[0].raw["env"]["FAKE_RAY_API_KEY"] is None
    # an actor is not dumpable (its /proc entries are root's): its initial environment is read from here
    initial = Path(f"/proc/{probe.steps[0].raw['pid']}/environ").read_bytes().decode(errors="replace")
    assert "PATH=" in initial and "FAKE_RAY_API_KEY=" not in initial
    assert probe.steps[0].raw["proc_environ_has"] in (None, ["PATH"])


def test_a_killed_actor_is_replaced_and_its_episode_retried(registry, ray_executor, tmp_path):
    pid_file = tmp_path / "pid"
    requests = [req(registry, "victim", "sleepy", policy_options={"seconds": 30, "pid_file": str(pid_file)}),
                *(req(registry, f"o{i}", "solver") for i in range(4))]
    def kill_when_written():
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)

    killer = threading.Thread(target=kill_when_written, daemon=True)
    killer.start()
    out = list(ray_executor.run(requests))
    killer.join()
    lost = [t for t in out if not t.final]
    assert len(lost) == 1 and lost[0].key == "victim" and lost[0].error_class == "infra_error"
    final = {t.key: t for t in out if t.final}
    assert set(final) == {r.key for r in requests} and final["victim"].attempt == 1
    assert all(t.error_class is None for t in final.values())


def test_time_limits_on_ray(registry, ray_executor):
    out = list(ray_executor.run([
        req(registry, "slow", "sleepy:10", timeout_s=0.3),
        req(registry, "hung", "sleepy", timeout_s=0.3, policy_options={"seconds": 20, "hang": True})]))
    by_key = {t.key: t for t in out if t.final}
    assert by_key["slow"].error_class == "timeout" and by_key["slow"].attempt == 0
    # a hung actor is killed after the grace period, replaced, and the episode retried (once)
    assert [(t.attempt, t.final) for t in out if t.key == "hung"] == [(0, False), (1, True)]
    assert by_key["hung"].error_class == "infra_error" and "hung" in by_key["hung"].error


DRIVER = """
import os, sys, threading, time
import envh, rollout_policies
from envh.rollout.executors.ray import RayExecutor
from envh.rollout.trajectory import EpisodeRequest
reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies])
envh.plugins.set_registry(reg)
spec = {"bridge": "toy24"}
request = EpisodeRequest(key="long", spec=envh.spec_to_data(envh.parse_spec(spec, reg), reg),
                         spec_id=envh.spec_id(spec, reg), policy="sleepy:120")
executor = RayExecutor(1, plugins=["rollout_policies"], entry_points=False)
threading.Thread(target=lambda: list(executor.run([request])), daemon=True).start()
time.sleep(3)
print("playing", flush=True)
time.sleep(600)
"""


def descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_kill_9_of_the_driver_leaves_no_ray_process_behind(tmp_path):
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH", ""))
                                         if p)}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        assert driver.stdout.readline().strip() == "playing"
        spawned = descendants(driver.pid)
        assert len(spawned) >= 3, "gcs, raylet and an actor at least"
    finally:
        driver.kill()
        driver.wait()
        driver.stdout.close()
    # Ray's agents (DashboardAgent, RuntimeEnvAgent) see their raylet gone after 5 checks 0.4 s
    # apart, then report the death to the GCS, which is dead too, with a 60 s timeout
    # (ray 2.60: _private/process_watcher.py report_raylet_error_logs -> utils.py
    # publish_error_to_driver(..., 60)) before they exit: about 62 s idle, so the wait allows
    # that and 30 s of a loaded machine (a 60 s wait failed in CI with both agents alive)
    deadline = time.monotonic() + 60 + 5 * 0.4 + 30
    while time.monotonic() < deadline and any(alive(p) for p in spawned):
        time.sleep(0.5)
    left = [p for p in spawned if alive(p)]
    names = [Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")[:80] for p in left if alive(p)]
    assert not left, f"orphans after kill -9 of the driver: {names}"
