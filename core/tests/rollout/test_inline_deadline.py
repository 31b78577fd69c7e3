"""The episode time limit holds inline, against code that disables its own timer.

Each evader (``evaders.py``) switches off the ``SIGALRM`` timer its own way and then
works for 20 s. The limit holds when the episode ends as a typed ``timeout`` row close
to its limit; a runner without the watchdog fails these tests on time (the loops end by
themselves), it does not hang them. What cannot be stopped in-process (every exception
swallowed, or one long C call) ends the process with the row recorded: tested through
``envh run`` as a real process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import envh
import evaders
import pytest
import rollout_policies
from envh import TaskRef
from envh.rollout import runner
from envh.rollout.executors.inline import ABANDONED_EXIT, InlineExecutor
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import EpisodeRequest

HERE = Path(__file__).parent
# The watchdog's raise lands in whatever Python code runs at that instant; when that is a
# finalizer (a weakref callback during the policy's loop) Python reports it as unraisable
# and the loop goes on until the next raise. Only those reports are ignored here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:(?s)Exception ignored in.*_Overrun:pytest.PytestUnraisableExceptionWarning")
TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
LIMIT = 0.5
# deadline + the timer's grace + one repeat of the watchdog + scheduling on a loaded box
BOUND = LIMIT + runner.WATCHDOG_GRACE_S + 2.5


@pytest.fixture
def registry():
    reg = envh.make_plugin_manager(entry_points=False, plugins=[evaders, rollout_policies])
    envh.plugins.set_registry(reg)
    yield reg
    envh.plugins.set_registry(None)


def req(registry, key, policy, **kw):
    spec = {"bridge": "toy24"}
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    return EpisodeRequest(key=key, spec=data, spec_id=envh.spec_id(spec, registry), task=TASK, seed=0,
                          policy=policy, run_id="r", **kw)


def _alarm_state():
    return signal.getsignal(signal.SIGALRM), signal.SIGALRM in signal.pthread_sigmask(signal.SIG_BLOCK, set())


@pytest.mark.parametrize("how", ["ignore", "disarm", "block", "handler"])
def test_a_policy_that_disables_the_timer_still_times_out_inline(registry, how):
    before = _alarm_state()
    with InlineExecutor(registry=registry, timeout_s=LIMIT) as inline:
        first = req(registry, "evade", f"evader:{how}")
        # built before the clock starts: the limit then falls in the policy's turn
        inline.check(first.policy, {}, spec=first.spec, spec_id=first.spec_id)
        inline.check("sleepy:5", {}, spec=first.spec, spec_id=first.spec_id)
        list(inline.run([req(registry, "warm", "sleepy:0.01", timeout_s=120)]))  # the env's first reset lists its tasks
        t0 = time.monotonic()
        (evaded,) = inline.run([first])
        took = time.monotonic() - t0
        # the next episode's timer works again: the signal's handler and mask were restored
        (honest,) = inline.run([req(registry, "next", "sleepy:5")])
    assert evaded.error_class == "timeout" and evaded.stop == "error", evaded.error
    if how == "block":
        # another OS thread of the process (a tokenizer's pool, a server earlier tests left) may
        # take the signal the main thread blocks, and Python runs its handler on the main thread
        # all the same: then the timer did its job; alone, the main thread needs the watchdog
        assert evaded.error_type in ("_Overrun", "_Deadline"), evaded.error_traceback
    else:
        assert evaded.error_type == "_Overrun", evaded.error_traceback
        assert "watchdog stopped it" in evaded.error
    assert f"{LIMIT:g} s" in evaded.error
    assert took < BOUND, took
    # the env was sound while the policy overran: its verdict is still taken
    assert evaded.verdict is not None and evaded.verdict.success is False
    assert honest.error_class == "timeout" and honest.error_type == "_Deadline" and honest.duration_s < BOUND
    assert _alarm_state() == before


@pytest.mark.parametrize("then", ["raise", "answer"])
def test_a_deadline_turned_into_another_error_or_an_answer_is_still_a_timeout(registry, then):
    """The timer works, but the policy catches its deadline: raising something else must not
    make the row a policy error, and answering anyway must not get the answer played."""
    with InlineExecutor(registry=registry, timeout_s=LIMIT) as inline:
        first = req(registry, "evade", "evader:none", policy_options={"then": then})
        inline.check(first.policy, first.policy_options, spec=first.spec, spec_id=first.spec_id)
        list(inline.run([req(registry, "warm", "sleepy:0.01", timeout_s=120)]))
        (t,) = inline.run([first])
    assert t.error_class == "timeout" and f"{LIMIT:g} s limit" in t.error, (t.error_class, t.error)
    assert t.steps == () and t.duration_s < BOUND  # the late answer was not played
    assert t.verdict is not None and t.verdict.success is False
    if then == "raise":
        assert t.error_type == "ValueError" and "something else went wrong" in t.error


def test_nothing_is_raised_after_an_episode_that_ended_near_its_limit(registry, monkeypatch):
    """Episodes that finish right around the watchdog's first raise: a raise not yet
    delivered when the episode ends must be dropped, not hit the caller later."""
    monkeypatch.setattr(runner, "WATCHDOG_GRACE_S", 0.0)
    monkeypatch.setattr(runner, "WATCHDOG_REPEAT_S", 0.005)
    requests = [req(registry, f"k{n}", f"punctual:{0.02 + 0.004 * n}", timeout_s=0.05) for n in range(25)]
    with InlineExecutor(registry=registry) as inline:
        for r in requests:
            inline.check(r.policy, {}, spec=r.spec, spec_id=r.spec_id)
        list(inline.run([req(registry, "warm", "sleepy:0.01", timeout_s=120)]))
        rows = list(inline.run(requests))
        end = time.monotonic() + 0.5
        while time.monotonic() < end:  # a stray pending raise would surface here
            sum(range(500))
    classes = {t.error_class for t in rows}
    assert classes <= {None, "timeout"} and len(rows) == 25
    assert "timeout" in classes and None in classes, classes  # both sides of the limit were played


@pytest.fixture
def cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "120"
    return env


@pytest.mark.parametrize("option", ["swallow=true", "sleep=true"])
def test_an_episode_that_cannot_be_stopped_is_recorded_and_ends_the_run(tmp_path, cli_env, option):
    spec = tmp_path / "spec.yaml"
    spec.write_text("bridge: toy24\n")
    out = tmp_path / "run"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from envh.cli import main; main()", "run", str(spec), "--split", "medium",
         "--tasks", "3", "--policy", "evader:ignore", "--policy-option", option, "--executor", "inline",
         "--timeout", "4", "--out", str(out), "--plugin", "evaders"],
        env=cli_env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == ABANDONED_EXIT, (proc.returncode, proc.stdout, proc.stderr)
    assert "could not be stopped in this process" in proc.stderr and "pool executor" in proc.stderr
    assert "no isolation, no secret scrubbing" in proc.stderr  # said before the run started
    with TrajectoryStore(out) as store:
        rows = list(store.query())
    # the process ended at the first episode that could not be stopped (on a loaded machine an
    # earlier one may have timed out in its reset, before the policy turned the timer off)
    assert 1 <= len(rows) < 3, [(t.key, t.error) for t in rows]
    assert all(t.error_class == "timeout" and t.stop == "error" for t in rows)
    last = rows[-1]
    assert "could not be stopped" in last.error and last.key in proc.stderr
    assert last.duration_s < 4 + runner.WATCHDOG_GRACE_S + runner.WATCHDOG_GIVE_UP_S + 3, last.duration_s
    assert took < 60, took  # the policy alone would run 20 s per episode


@pytest.mark.slow
def test_c_code_holding_the_gil_still_ends_the_run(tmp_path, cli_env):
    """A catastrophic regex holds the GIL: neither the timer nor the watchdog's thread can
    run. faulthandler's C thread ends the process at the hard limit (no row: nothing in
    Python can run to write one); every thread's stack is on stderr."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("bridge: toy24\n")
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from envh.cli import main; main()", "run", str(spec), "--split", "medium",
         "--tasks", "1", "--policy", "evader:ignore", "--policy-option", "regex=true", "--executor", "inline",
         "--timeout", "3", "--out", str(tmp_path / "run"), "--plugin", "evaders"],
        env=cli_env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Timeout (" in proc.stderr and "evaders.py" in proc.stderr  # where it was stuck
    hard = 3 + runner.WATCHDOG_GRACE_S + runner.WATCHDOG_GIVE_UP_S + runner.WATCHDOG_HARD_S
    assert took < hard + 30, took


def test_a_timer_armed_around_an_episode_goes_on_after_it(registry):
    """pytest-timeout, or any caller's own limit, uses the same process-wide timer: the
    episode's limit borrows it and hands back what is left."""
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with InlineExecutor(registry=registry, timeout_s=5) as inline:
            (t,) = inline.run([req(registry, "quick", "sleepy:0.01")])
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert signal.getsignal(signal.SIGALRM) is not previous and t.error_class is None
        assert 20 < left <= 30, left
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        time.sleep(0.5)
        assert len(fired) == 1  # the caller's handler is back in place
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
