"""The process pool with real worker processes: concurrency, crashes, hangs, secrets,
resource limits."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import envh
import pytest
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.trajectory import EpisodeRequest

SPEC = {"bridge": "toy24"}


def req(registry, key, policy, **kw):
    data = envh.spec_to_data(envh.parse_spec(SPEC, registry), registry)
    return EpisodeRequest(key=key, spec=data, spec_id=envh.spec_id(SPEC, registry), policy=policy, **kw)


def kill_when_written(pid_file, pool, key, sig=signal.SIGKILL):
    """Kill the worker playing ``key`` once its policy wrote ``pid_file`` (the pid it
    writes is its namespace's; the pool knows the real one)."""
    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if pid_file.exists() and pid_file.read_text() and key in pool.busy():
                os.kill(pool.busy()[key], sig)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_n_workers_play_n_episodes_at_once(registry, worker_env):
    with PoolExecutor(2, **worker_env) as pool:
        list(pool.run([req(registry, "warmup", "solver")]))  # start-up is not what we time
        t0 = time.monotonic()
        out = list(pool.run([req(registry, f"s{i}", "sleepy:0.8") for i in range(4)]))
        elapsed = time.monotonic() - t0
    assert len(out) == 4 and all(t.error_class is None for t in out)
    assert elapsed < 2.6, f"4 episodes of 0.8 s on 2 workers took {elapsed:.2f} s: not concurrent"
    assert len({t.worker for t in out}) == 2


def test_a_worker_killed_mid_episode_is_replaced_and_the_episode_retried(registry, worker_env, tmp_path):
    pid_file = tmp_path / "pid"
    requests = [req(registry, "victim", "sleepy", policy_options={"seconds": 30, "pid_file": str(pid_file)})]
    requests += [req(registry, f"other{i}", "solver") for i in range(6)]
    with PoolExecutor(2, **worker_env) as pool:
        watcher = kill_when_written(pid_file, pool, "victim")
        out = list(pool.run(requests))
        watcher.join()
        assert len(pool.pids()) <= 2
    lost = [t for t in out if not t.final]
    assert len(lost) == 1 and lost[0].key == "victim" and lost[0].error_class == "infra_error"
    assert "SIGKILL" in lost[0].error and lost[0].attempt == 0
    final = {t.key: t for t in out if t.final}
    assert set(final) == {r.key for r in requests}
    assert final["victim"].attempt == 1 and final["victim"].error_class is None
    assert all(t.error_class is None for t in final.values())


def test_retries_are_bounded(registry, worker_env, tmp_path):
    # the pid file is deleted each time, so every attempt sleeps and is killed
    pid_file = tmp_path / "pid"
    stop = threading.Event()

    def killer(pool):
        while not stop.is_set():
            if pid_file.exists() and pid_file.read_text() and "doomed" in pool.busy():
                pid = pool.busy()["doomed"]
                pid_file.unlink()
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    try:
        with PoolExecutor(1, retries=1, **worker_env) as pool:
            thread = threading.Thread(target=killer, args=(pool,), daemon=True)
            thread.start()
            out = list(pool.run([req(registry, "doomed", "sleepy",
                                     policy_options={"seconds": 30, "pid_file": str(pid_file)})]))
    finally:
        stop.set()
        thread.join()
    assert [(t.attempt, t.final, t.error_class) for t in out] == [(0, False, "infra_error"),
                                                                  (1, True, "infra_error")]


def test_a_hung_worker_is_killed_after_the_grace_period(registry, worker_env):
    with PoolExecutor(1, grace_s=0.5, retries=0, **worker_env) as pool:
        t0 = time.monotonic()
        out = list(pool.run([req(registry, "hang", "sleepy", timeout_s=0.5,
                                 policy_options={"seconds": 20, "hang": True})]))
        assert time.monotonic() - t0 < 5
        (t,) = out
        assert t.final and t.error_class == "infra_error" and "hung" in t.error
        # the replacement worker is healthy
        (after,) = pool.run([req(registry, "after", "solver")])
        assert after.error_class is None and after.verdict is not None


def test_episode_timeouts_and_cpu_budgets_end_as_timeouts(registry, worker_env):
    with PoolExecutor(1, cpu_s=1, **worker_env) as pool:
        slow, burn = pool.run([req(registry, "slow", "sleepy:10", timeout_s=0.3),
                               req(registry, "burn", "sleepy", policy_options={"seconds": 30, "burn": True})])
    assert slow.error_class == "timeout" and slow.final and slow.attempt == 0
    # 1 s of CPU, not the 30 s the policy would burn (wall time stretches on a loaded machine)
    assert burn.error_class == "timeout" and "CPU budget" in burn.error and burn.duration_s < 25


def test_workers_hold_no_secrets_unless_passed(registry, worker_env, monkeypatch):
    monkeypatch.setenv("FAKE_API_KEY", "sk-123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws")
    monkeypatch.setenv("GITHUB_TOKEN", "gh")
    monkeypatch.setenv("HARMLESS", "ok")
    names = "FAKE_API_KEY,AWS_SECRET_ACCESS_KEY,GITHUB_TOKEN,HARMLESS"
    with PoolExecutor(1, memory_mb=3000, **worker_env) as pool:
        (t,) = pool.run([req(registry, "probe", f"envprobe:{names}")])
        (pid,) = pool.pids()
        initial = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")  # read from outside
    raw = t.steps[0].raw
    assert raw["env"] == {"FAKE_API_KEY": None, "AWS_SECRET_ACCESS_KEY": None, "GITHUB_TOKEN": None,
                          "HARMLESS": "ok"}
    # not even in the process's initial environment
    assert [n for n in names.split(",") if n + "=" in initial] == ["HARMLESS"]
    assert raw["proc_environ_has"] in (None, ["HARMLESS"])
    assert raw["rlimit_data"] == 3000 * 1024 * 1024 and raw["pid"] != os.getpid()
    with PoolExecutor(1, pass_env=["FAKE_API_KEY"], **worker_env) as pool:
        (t,) = pool.run([req(registry, "probe", f"envprobe:{names}")])
    assert t.steps[0].raw["env"]["FAKE_API_KEY"] == "sk-123"
    assert t.steps[0].raw["env"]["GITHUB_TOKEN"] is None


def test_workers_that_cannot_start_are_reported(registry, worker_env):
    with PoolExecutor(1, plugins=["no_such_module_anywhere"], entry_points=False, retries=0) as pool:
        with pytest.raises(envh.errors.InfraError, match="dying at start-up"):
            list(pool.run([req(registry, f"x{i}", "solver") for i in range(3)]))


def test_stopping_early_leaves_no_stale_episode_behind(registry, worker_env):
    with PoolExecutor(2, **worker_env) as pool:
        first = pool.run([req(registry, "quick", "solver"), req(registry, "slow", "sleepy:5"),
                          *(req(registry, f"q{i}", "solver") for i in range(3))])
        next(first)
        first.close()
        out = list(pool.run([req(registry, f"n{i}", "solver") for i in range(4)]))
    assert sorted(t.key for t in out) == ["n0", "n1", "n2", "n3"]


def test_a_negative_worker_count_is_refused_not_a_silent_hang(worker_env):
    with pytest.raises(ValueError, match="cannot be negative"):
        PoolExecutor(-1, **worker_env)


def test_what_a_worker_started_goes_with_it(registry, worker_env, tmp_path):
    """Without namespaces (the default when not root) a child a policy or bridge started
    outlived the pool: only the worker itself was killed, not its process group."""
    pid_file = tmp_path / "child.pid"
    with PoolExecutor(1, isolation="none", **worker_env) as pool:
        (t,) = pool.run([req(registry, "forker", "forker", policy_options={"pid_file": str(pid_file)})])
        assert t.error_class is None, t.error
        child = int(pid_file.read_text())
        os.kill(child, 0)  # alive while the worker is
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:  # gone, or a zombie nobody reaps (PID 1 of a container may not)
            if Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the worker's child outlived the pool")
