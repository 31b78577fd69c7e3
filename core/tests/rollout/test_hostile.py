"""Nothing escapes the runner: hostile bridges and policies (wrong types, every kind of
exception including ``SystemExit`` and ``KeyboardInterrupt``, huge outputs, a process
exit, a crash in C) through inline, the pool and Ray. Every run finishes, with one
typed final row per episode carrying the error's type and traceback; the verdict is
taken whenever the env is still sound; and a Python component that forges reward and
verdict is read past (the base bridge's are recorded, the forgery beside them)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import envh
import hostile
import pytest
from envh.rollout.executors.inline import InlineExecutor
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import ERROR_CLASSES, EpisodeRequest, trajectory_from_json, trajectory_to_json

WHERE = ("reset", "step", "tools", "evaluate")


def req(registry, key, policy, config=None, layers=(), **kw):
    spec = {"bridge": "hostile", "config": config or {}, "layers": list(layers)}
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    return EpisodeRequest(key=key, spec=data, spec_id=envh.spec_id(spec, registry), policy=policy, max_steps=5,
                          **kw)


def cases(registry, process=False):
    """(request, expected error class or None) for every hostile mode."""
    out = []
    policy_modes = hostile.RAISING + (hostile.PROCESS if process else ())
    for mode in policy_modes + hostile.POLICY_VALUES:
        expected = None if mode in ("badusage", "badraw") else "infra_error" if mode in hostile.PROCESS \
            else "policy_error"
        out.append((req(registry, f"policy/{mode}", f"hostile:{mode}@1"), expected))
        out.append((req(registry, f"policy/start-{mode}", f"hostile:start-{mode}"),
                    None if mode not in policy_modes else "infra_error" if mode in hostile.PROCESS
                    else "policy_error"))
    for mode in policy_modes:
        for where in WHERE:
            out.append((req(registry, f"bridge/{where}/{mode}", "hostile:none@1", {"mode": mode, "where": where}),
                        "infra_error" if mode in hostile.PROCESS else "env_error"))
    for mode in hostile.BRIDGE_VALUES:
        where = "evaluate" if mode.startswith("evaluate") else "tools" if mode.startswith("tools") else "step"
        out.append((req(registry, f"bridge/{where}/{mode}", "hostile:none@1", {"mode": mode, "where": where}),
                    "env_error"))
    out.append((req(registry, "policy/build", "hostile:build"), "policy_error"))
    return out


def check_rows(out, expected, process=False):
    finals = {t.key: t for t in out if t.final}
    assert set(finals) == set(expected), "one final row per episode"
    for key, want in expected.items():
        t = finals[key]
        assert t.error_class == want, (key, t.error_class, t.error)
        assert trajectory_from_json(trajectory_to_json(t)) == t
        if want is None:
            continue
        assert t.error_class in ERROR_CLASSES and t.error and t.stop == "error"
        if want != "infra_error":
            assert t.error_type and t.error_traceback and "Traceback" in t.error_traceback, key
        if key.startswith("policy/") and want == "policy_error" and key != "policy/build":
            # the env was sound: its verdict is taken although the policy failed
            assert t.verdict is not None and t.verdict.success is False, key
        if key.startswith("bridge/"):
            assert t.verdict is None, key
    for t in finals.values():
        for step in t.steps:
            assert all(isinstance(n, int) and not isinstance(n, bool) for n in step.usage.values())
    return finals


def test_hostile_plugins_inline(registry):
    expected = {r.key: want for r, want in cases(registry)}
    with InlineExecutor(registry=registry) as inline:
        out = list(inline.run([r for r, _ in cases(registry)]))
    finals = check_rows(out, expected)
    assert finals["policy/systemexit"].error_type == "SystemExit"
    assert finals["policy/keyboardinterrupt"].error_type == "KeyboardInterrupt"
    assert finals["bridge/step/generatorexit"].error_type == "GeneratorExit"
    assert finals["bridge/reset/baseexception"].error_type == "Boom"
    assert "reward=None" in finals["bridge/step/reward_none"].error
    assert "8388608" in finals["bridge/step/huge_obs"].error and "8388608" in finals["policy/hugeraw"].error
    usage = finals["policy/badusage"]
    assert usage.steps[-1].usage == {"ok": 5} and usage.steps[-1].error["type"] == "usage"
    assert "could not be recorded" in finals["policy/badraw"].steps[-1].raw


def test_the_runner_survives_a_plain_call_too(registry):
    """run_episode without an executor (its own Warm): a close() that raises SystemExit is
    recorded, not raised."""
    t = run_episode(req(registry, "close", "hostile:close"), registry=registry)
    assert t.error_class == "env_error" and "SystemExit" in t.error and t.verdict is not None


def test_hostile_plugins_in_the_pool(registry, worker_env):
    requests = cases(registry, process=True)
    expected = {r.key: want for r, want in requests}
    with PoolExecutor(2, retries=0, **worker_env) as pool:
        out = list(pool.run([r for r, _ in requests]))
        assert len(pool.pool) <= 2
    finals = check_rows(out, expected, process=True)
    exited = finals["policy/exit"]
    assert "exited with status 7" in exited.error and "HostileExit: seven" in exited.error
    assert "HostileExit: seven" in exited.error_traceback
    crashed = finals["bridge/step/segfault"]
    assert "killed by SIGSEGV" in crashed.error and "Segmentation fault" in crashed.error_traceback
    # raising plugins did not cost a worker: the worker that played them is still the one
    raising = [finals[f"policy/{m}"].worker for m in hostile.RAISING]
    assert len(set(raising)) <= 2


def test_hostile_plugins_on_ray(registry, ray_executor):
    requests = [(r, want) for r, want in cases(registry, process=True)
                if r.key.split("/")[-1] in ("systemexit", "keyboardinterrupt", "baseexception", "exit",
                                             "reward_none", "notastep", "badusage", "build")]
    requests.append((req(registry, "policy/alloc", "hostile:alloc@0"), "policy_error"))  # over its 3000 MB
    expected = {r.key: want for r, want in requests}
    out = list(ray_executor.run([r for r, _ in requests]))
    finals = check_rows(out, expected, process=True)
    assert finals["policy/alloc"].error_type == "MemoryError"  # actors get a memory limit by default
    died = finals["policy/exit"]
    assert "Ray actor failed" in died.error and died.error_traceback
    assert [t.attempt for t in out if t.key == "policy/exit"] == [0, 1]  # retried once, then final


def test_a_memory_bomb_under_the_limit_is_a_typed_row_and_the_worker_lives_on(registry, worker_env):
    with PoolExecutor(1, memory_mb=1500, retries=0, **worker_env) as pool:
        bomb, after = pool.run([req(registry, "bomb", "hostile:alloc@0"), req(registry, "after", "hostile:none@0")])
    assert bomb.error_class == "policy_error" and bomb.error_type == "MemoryError"
    assert after.error_class is None and after.worker == bomb.worker


def test_forged_reward_and_verdict_are_read_past(registry):
    """A component overriding step() pays 100 a step and swaps its inner for a proxy that
    claims success; the runner records the base bridge's reward and verdict, the forgery
    beside them, and the audit's findings."""
    spec = {"bridge": "toy24", "layers": [{"kind": "forge"}]}
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    task = envh.TaskRef(suite="toy24", split="hard", instance_id="1,5,5,5")
    t = run_episode(EpisodeRequest(key="forge", spec=data, spec_id=envh.spec_id(spec, registry), task=task,
                                   policy="hostile:none@0"), registry=registry)
    assert t.error_class is None and len(t.steps) == 1
    assert t.verdict.success is False and t.outer_verdict.success is True
    assert t.steps[0].reward == 0.0 and t.steps[0].outer_reward == 100.0
    assert t.success is False and t.total_reward == 0.0
    assert any("step() is overridden" in f for f in t.audit) and any("proxy" in f for f in t.audit)
    honest = run_episode(EpisodeRequest(key="honest", spec=envh.spec_to_data(envh.parse_spec(
        {"bridge": "toy24"}, registry), registry), spec_id=envh.spec_id({"bridge": "toy24"}, registry), task=task,
        policy="hostile:none@0"), registry=registry)
    assert honest.outer_verdict is None and honest.steps[0].outer_reward is None and honest.audit == []


def test_forged_verdicts_inside_a_chain_are_read_past(registry):
    spec = {"bridge": "toy24", "layers": [{"kind": "chain", "legs": [
        {"bridge": "toy24", "layers": [{"kind": "forge"}]}]}]}
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    task = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
    t = run_episode(EpisodeRequest(key="chain", spec=data, spec_id=envh.spec_id(spec, registry), task=task,
                                   policy="hostile:none@0", max_steps=4), registry=registry)
    # both legs stopped at once: both base verdicts fail; the forging leg claimed success
    assert [leg["success"] for leg in t.verdict.metrics["legs"]] == [False, False]
    assert [leg["success"] for leg in t.outer_verdict.metrics["legs"]] == [False, True]
    assert t.success is False and [s.outer_reward for s in t.steps] == [None, 100.0]


@contextmanager
def _sigint(handler, after_s=None):
    """``handler`` as the SIGINT handler while the block runs (the one an earlier test left
    is yielded, then put back); with ``after_s``, a SIGINT to this process that long after
    the block starts, as a person's Ctrl-C (cancelled if the block ends first)."""
    import signal
    import threading

    left = signal.signal(signal.SIGINT, handler)
    timer = threading.Timer(after_s or 0, lambda: os.kill(os.getpid(), signal.SIGINT))
    try:
        if after_s is not None:
            timer.start()
        yield left
    finally:
        timer.cancel()
        if after_s is not None:
            timer.join()
        signal.signal(signal.SIGINT, left)


def test_a_real_ctrl_c_still_stops_an_inline_run(registry):
    """A SIGINT to the process while an inline episode runs stops the run (a KeyboardInterrupt
    out of it), under Python's own SIGINT handler, which this test installs: the worker
    process ran other tests before, and a run of the suite once ended this one without
    the interrupt (not reproduced; the message now says what the run recorded and which
    handler was there)."""
    import signal

    played = []
    with _sigint(signal.default_int_handler, after_s=0.3) as left:
        try:
            with InlineExecutor(registry=registry) as inline:
                played += inline.run([req(registry, "sleep", "sleepy:5")])
        except KeyboardInterrupt:
            pass
        else:
            pytest.fail(f"the run ended without the Ctrl-C: {[(t.error_class, t.error) for t in played]} "
                        f"(SIGINT handler left by earlier tests: {left!r})")


def test_a_ctrl_c_under_a_hosts_own_handler_still_stops_an_inline_run(registry):
    """An app or launcher that installed its own SIGINT handler (clean up, then Python's
    default): the Ctrl-C is still a person's, not plugin code's to be contained."""
    import signal

    seen = []

    def hosts(signum, frame):
        seen.append(signum)
        signal.default_int_handler(signum, frame)

    with _sigint(hosts, after_s=0.3), pytest.raises(KeyboardInterrupt), \
            InlineExecutor(registry=registry) as inline:
        list(inline.run([req(registry, "sleep", "sleepy:5")]))
    assert seen == [signal.SIGINT]  # the host's handler ran too


def test_a_ctrl_c_that_code_in_the_episode_swallowed_still_stops_the_run(registry):
    """The Ctrl-C lands while the runner records a raw output whose repr it cannot trust
    (it drops whatever that raises): the episode ends, and then the run stops."""
    import signal

    with _sigint(signal.default_int_handler), pytest.raises(KeyboardInterrupt), \
            InlineExecutor(registry=registry) as inline:
        list(inline.run([req(registry, "ctrl-c", "ctrl-c-in-recording")]))


def test_garbage_on_the_protocol_pipe_costs_the_worker_not_the_parent(registry, worker_env):
    """Code that took over a worker writes a frame nested past any recursion limit, or a
    result the parent cannot read: the parent drops that worker, records the attempt and
    plays on."""
    requests = [req(registry, "deep", "hostile:deepframe@0"), req(registry, "bad", "hostile:badframe@0"),
                req(registry, "fine", "hostile:none@0")]
    with PoolExecutor(1, retries=1, **worker_env) as pool:
        out = list(pool.run(requests))
    finals = {t.key: t for t in out if t.final}
    assert finals["fine"].error_class is None
    for key, why in (("deep", "malformed frame"), ("bad", "unreadable trajectory")):
        assert finals[key].error_class == "infra_error" and why in finals[key].error, finals[key].error
        assert [t.attempt for t in out if t.key == key] == [0, 1]


def test_a_component_cannot_overwrite_where_the_base_verdict_is_kept(registry):
    """The base's own evaluate() was kept on the env instance under a fixed name; a
    component that claims success without asking its inner env and overwrites that name
    got its success recorded as the base verdict."""
    spec = {"bridge": "toy24", "layers": [{"kind": "forge_hook"}]}
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    task = envh.TaskRef(suite="toy24", split="hard", instance_id="1,5,5,5")
    t = run_episode(EpisodeRequest(key="hook", spec=data, spec_id=envh.spec_id(spec, registry), task=task,
                                   policy="hostile:none@0"), registry=registry)
    assert t.error_class is None
    assert t.verdict.success is False and t.outer_verdict.success is True and t.success is False


def test_a_component_patching_the_base_class_at_build_is_reported(registry):
    """A component that replaces the base bridge's class evaluate() before the runner taps
    it: in-process this cannot be undone, but the trajectory names it."""
    from envh.bridges.toy24 import Toy24Env

    original = Toy24Env.__dict__["evaluate"]
    spec = {"bridge": "toy24", "layers": [{"kind": "forge_class"}]}
    try:
        data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
        task = envh.TaskRef(suite="toy24", split="hard", instance_id="1,5,5,5")
        t = run_episode(EpisodeRequest(key="cls", spec=data, spec_id=envh.spec_id(spec, registry), task=task,
                                       policy="hostile:none@0"), registry=registry)
    finally:
        Toy24Env.evaluate = original
    assert t.error_class is None
    assert any("Toy24Env.evaluate() of the base env was replaced" in f and "_always_won" in f for f in t.audit)
