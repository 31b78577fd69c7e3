"""The shared browser runtime: a dead browser or a crashed page is an InfraError and the
next episode works; a reset costs a context, not a launch; memory stays flat."""

from __future__ import annotations

import contextlib
import os
import time

import pytest
from envh import Action, TaskRef, errors
from envh_webarena.axtree import find_bid
from procgroup import group_pids

CLICK = TaskRef(suite="miniwob", instance_id="click-button")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def env():
    from envh_webarena.miniwob import MiniwobEnv

    e = MiniwobEnv(tasks=["click-button", "enter-text"])
    yield e
    e.close()


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def group_rss_mb(pgid: int) -> tuple[float, int]:
    """Resident memory (MB) and process count of a process group (the browser's)."""
    total, count = 0, 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{pid}/statm", encoding="ascii") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            count += 1
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20, count


def self_rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_dead_browser_mid_episode_is_infra_error_then_next_episode_works(env) -> None:
    from envh_webarena.runtime import _start_time, shared_runtime

    obs = env.reset(task=CLICK, seed=1).observation
    runtime = shared_runtime()
    old_pid, launches = runtime.pid, runtime.launches
    runtime.kill()
    with pytest.raises(errors.InfraError, match="died|went away"):
        env.step(Action(tool="click", args={"bid": find_bid(obs.text, "button")}))
    # dead: gone, or a zombie until Playwright's driver (its parent) reaps it
    assert _start_time(old_pid) is None  # type: ignore[arg-type]
    obs = env.reset(task=CLICK, seed=1).observation  # relaunched
    assert runtime.pid != old_pid and runtime.launches == launches + 1
    target = obs.data["goal"].split('"')[1]
    resp = env.step(Action(tool="click", args={"bid": find_bid(obs.text, "button", target)}))
    assert resp.terminated and env.evaluate().success


def test_crashed_page_ends_the_episode_and_browser_survives(env) -> None:
    from envh_webarena.runtime import shared_runtime

    env.reset(task=CLICK, seed=2)
    pid = shared_runtime().pid
    session = env.session
    renderers = [p for p in group_pids(pid) if b"--type=renderer" in _cmdline(p)]  # type: ignore[arg-type]
    assert renderers
    killed = 0
    for p in renderers:  # as the OOM killer would
        with contextlib.suppress(ProcessLookupError):  # a spare renderer may exit on its own meanwhile
            os.kill(p, 9)
            killed += 1
    assert killed
    deadline = time.monotonic() + 10
    while not session.crashed and time.monotonic() < deadline:
        try:  # any Playwright call lets it deliver the crash event
            session.page.wait_for_timeout(50)
        except Exception:  # noqa: BLE001 - the crashed page may refuse the call itself
            break
    resp = env.step(Action(tool="noop", args={}))  # the browser lives: the page's crash, not a replay
    assert resp.terminated and resp.info["terminated_by"] == "page_crashed"
    assert env.reset(task=CLICK, seed=2).observation.data["goal"]
    assert shared_runtime().pid == pid  # a crashed page does not cost a browser launch


def test_contexts_are_isolated_between_episodes(demo_sites) -> None:
    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    shop = demo_sites["shop"].url
    one = BrowserSession(shared_runtime())
    one.page.goto(f"{shop}/customer/account/login/")
    one.page.get_by_label("Email", exact=True).fill("emma.lopez@gmail.com")
    one.page.get_by_label("Password", exact=True).fill("Password.123")
    one.page.get_by_role("button", name="Sign In").click()
    one.page.wait_for_load_state()
    assert "Signed in" in one.page.content()
    two = BrowserSession(shared_runtime())
    two.page.goto(f"{shop}/")
    assert "Signed in" not in two.page.content() and not two.context.cookies()
    one.close()
    two.close()


def test_reset_reuses_the_browser(env) -> None:
    from envh_webarena.runtime import shared_runtime

    env.reset(task=CLICK, seed=0)
    launches, pid = shared_runtime().launches, shared_runtime().pid
    for seed in range(5):
        env.reset(task=CLICK, seed=seed)
    assert shared_runtime().launches == launches and shared_runtime().pid == pid


def test_memory_does_not_grow_with_resets(env) -> None:
    """30 resets (a context made ahead each time, a step now and then), memory sampled every
    10: the browser's process count stays put and its memory, like Python's, ends within
    loose bounds of where it started. A context or page left open per episode costs a
    renderer per reset (one more process, ~300 MB/reset of summed RSS when session.close is
    made a no-op), which this catches in 30 resets. The slopes over 200 resets, against
    that leak measured in the same run: ``bench/browser_memory.py``."""
    from envh_webarena.runtime import shared_runtime

    for seed in range(5):  # warm-up: caches, the JIT, the task server
        env.reset(task=CLICK, seed=seed)
    pgid = shared_runtime().pid
    samples: list[tuple[int, float, int, float]] = []
    for seed in range(31):
        obs = env.reset(task=CLICK, seed=seed).observation
        if seed % 10 == 5:
            env.step(Action(tool="click", args={"bid": find_bid(obs.text, "button")}))
        if seed % 10 == 0:
            browser, procs = group_rss_mb(pgid)  # type: ignore[arg-type]
            samples.append((seed, browser, procs, self_rss_mb()))
    print(f"browser {samples[0][1]:.0f} -> {samples[-1][1]:.0f} MB, {samples[0][2]} -> {samples[-1][2]} processes; "
          f"python {samples[0][3]:.0f} -> {samples[-1][3]:.0f} MB")
    assert shared_runtime().pid == pgid
    # a closed context's renderer can outlive it a moment on a loaded machine (one sample saw
    # 9 -> 12 mid-run, 10 at the end): the count at the end, once settled, is what a leak
    # (a renderer per reset: 30 more) cannot pass
    bound, deadline = samples[0][2] + 2, time.monotonic() + 10
    while (count := group_rss_mb(pgid)[1]) > bound and time.monotonic() < deadline:  # type: ignore[arg-type]
        time.sleep(0.5)
    assert count <= bound, f"renderer processes leak: {count} at the end; {samples}"
    assert samples[-1][1] - samples[0][1] < 150, "browser memory after 30 resets"
    assert samples[-1][3] - samples[0][3] < 30, "python memory after 30 resets"


def test_a_page_spinning_in_javascript_is_bounded() -> None:
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    env = MiniwobEnv(tasks=["click-button"], hang_timeout_s=3)
    try:
        env.reset(task=CLICK, seed=0)
        env.session.page.evaluate("() => { setTimeout(() => { while (true) {} }, 0); }")
        start = time.monotonic()
        resp = env.step(Action(tool="noop", args={"wait_ms": 100}))  # the page's hang: the policy's failure
        assert resp.terminated and resp.info["terminated_by"] == "page_hang"
        assert time.monotonic() - start < 20
        assert env.reset(task=CLICK, seed=0).observation.data["goal"]  # a new browser
        assert shared_runtime().alive()
    finally:
        env.close()


def test_screenshot_is_optional() -> None:
    import base64

    from envh_webarena.miniwob import MiniwobEnv

    with MiniwobEnv(tasks=["click-button"], screenshot=True) as env:
        data = env.reset(task=CLICK, seed=0).observation.data
        assert base64.b64decode(data["screenshot_png_base64"]).startswith(b"\x89PNG")
    with MiniwobEnv(tasks=["click-button"]) as env:
        assert "screenshot_png_base64" not in env.reset(task=CLICK, seed=0).observation.data
