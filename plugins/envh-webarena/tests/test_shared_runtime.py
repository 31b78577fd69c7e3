"""One browser runtime per worker thread: a thread that reuses an ended thread's id gets a
runtime of its own (the ended one's is closed), and a host name allowed later for one bridge
relaunches the browser without taking it from another bridge's live episode."""

from __future__ import annotations

import os
import re
import secrets
import threading
import time

import pytest
from envh import Action, TaskRef

pytestmark = pytest.mark.timeout(240)


def _gone(pid: int, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        from envh_webarena.runtime import _start_time

        if _start_time(pid) is None:  # gone, or a zombie until Playwright's driver reaps it
            return True
        time.sleep(0.05)
    return False


def test_a_thread_reusing_an_ended_threads_id_gets_its_own_runtime() -> None:
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    seen: dict[str, object] = {}

    def first() -> None:
        rt = shared_runtime()
        rt.browser()
        seen["first"] = (threading.get_ident(), rt, rt.pid)

    def second() -> None:
        if threading.get_ident() != seen["first"][0]:  # type: ignore[index]
            return  # not the reused id: the next thread tries
        rt = shared_runtime()
        seen["second"] = (threading.get_ident(), rt)
        env = MiniwobEnv(tasks=["click-button"])
        try:
            seen["goal"] = env.reset(task=TaskRef(suite="miniwob", instance_id="click-button"), seed=1) \
                .observation.data["goal"]
        except Exception as exc:  # noqa: BLE001 - reported to the test's thread
            seen["error"] = exc
        finally:
            env.close()

    t = threading.Thread(target=first)
    t.start()
    t.join()
    ident, old, old_pid = seen["first"]  # type: ignore[misc]
    for _ in range(100):  # a new thread usually gets an ended thread's stack, and its id
        t = threading.Thread(target=second)
        t.start()
        t.join()
        if "second" in seen:
            break
    assert "second" in seen, "thread ids were not reused here: the case cannot be made"
    new = seen["second"][1]  # type: ignore[index]
    try:
        assert seen["second"][0] == ident  # type: ignore[index]
        assert "error" not in seen, seen.get("error")
        assert "Click on the" in str(seen["goal"])
        assert new is not old and _gone(old_pid)  # the ended thread's browser is stopped
    finally:
        new.close()  # type: ignore[attr-defined]


def test_a_host_allowed_later_leaves_another_bridges_live_episode_alone() -> None:
    """Bridge A plays click-button; bridge B in the same thread allows a new host name, so
    the browser is relaunched with new resolver rules: A's episode goes on (and wins) on the
    old browser, which stops once A's episode closes."""
    from envh_webarena.axtree import find_bid
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    rt = shared_runtime()
    a = MiniwobEnv(tasks=["click-button"])
    b = MiniwobEnv(tasks=["enter-text"])
    b.extra_hosts = (f"envh-{secrets.token_hex(4)}.test",)
    try:
        obs = a.reset(task=TaskRef(suite="miniwob", instance_id="click-button"), seed=2).observation
        old_pid, launches = rt.pid, rt.launches
        b.reset(task=TaskRef(suite="miniwob", instance_id="enter-text"), seed=1)
        assert rt.pid != old_pid and rt.launches == launches + 1  # relaunched for B's host
        name = re.search(r'"(.*)"', obs.data["goal"]).group(1)
        done = a.step(Action(tool="click", args={"bid": find_bid(obs.text, "button", name)}))
        assert done.reward == 1.0 and done.terminated and not done.info.get("error")
        os.kill(old_pid, 0)  # still running: A's episode is open on it
        a.close()
        assert _gone(old_pid)
        assert b.step(Action(tool="noop", args={})).observation.text  # B unaffected
    finally:
        a.close()
        b.close()
