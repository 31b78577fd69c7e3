"""Attacks on the per-call CPU limit, the per-stack jails and the trusted tier's fused
step; each stays fixed."""

from __future__ import annotations

import gc
import os
import time

import envh
import pytest
from envh import Action, TaskRef
from envh.components.contract import CodeContract
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path
from proctools import alive

TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")


def make(code: str, trust: str = "untrusted", **layer: object) -> envh.ActionableEnv:
    return envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code, **layer}]}, trust=trust)


def test_an_answer_too_costly_to_encode_dies_before_a_byte_is_written() -> None:
    """A memo whose encoding outlasts the CPU grace (60 MB of escaped characters): the
    timer fires while the answer is encoded, or the host refuses its size; never a torn
    answer, always a typed error, the memo unchanged and the next call answered."""
    code = ("def filter_action(action, state, memo):\n"
            "    if memo.get('big') is None:\n        return None\n"
            "    memo['x'] = '\\x00' * 5000000\n    memo['y'] = '\\x00' * 5000000\n")
    env = make(code, time_limit_ms=20)
    try:
        env.reset(task=TASK, seed=0)
        env.memo["big"] = True
        with pytest.raises(ContractCodeError, match="CPU time limit|byte limit"):
            env.step(ADD)
        assert env.memo == {"big": True}
        env.memo = {}
        assert env.step(ADD).info.get("error") is None
    finally:
        env.close()


def test_a_stack_that_fails_half_built_leaves_no_jail_process() -> None:
    """The first contract loads (its jail starts), the second is refused: nobody holds the
    half-built stack, and its jail process goes with it."""
    before = _children()
    with pytest.raises(ContractCodeError):
        envh.make({"bridge": "toy24", "layers": [
            {"kind": "contract", "code": UPPER},
            {"kind": "contract", "code": "X = [0] * (10**9)\n" + UPPER}]}, trust="untrusted")
    gc.collect()
    assert _children() <= before


def test_a_forked_child_dropping_its_copy_does_not_kill_the_parents_jail() -> None:
    """A pool worker forked from a process with a live stack inherits the ``Jail`` (and
    its finalizer): collecting it in the child must not end the parent's jail process."""
    env = make(UPPER)
    try:
        pid = env._jail.pid  # type: ignore[attr-defined]
        assert pid is not None
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            try:
                del env
                gc.collect()
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        assert alive(pid)
        env.reset(task=TASK, seed=0)
        assert env.step(ADD).observation.text.startswith("TARGET")
        assert env._jail.restarts == 0  # type: ignore[attr-defined]
    finally:
        env.close()


def test_a_closed_stack_cannot_be_used_to_reach_another_stacks_jail() -> None:
    a, b = make(UPPER), make(UPPER)
    try:
        ja, jb = a._jail, b._jail  # type: ignore[attr-defined]
        a.close()
        assert ja.pid is None and jb.pid is not None
        with pytest.raises(ContractCodeError, match="closed"):
            a.reset(task=TASK, seed=0)
        b.reset(task=TASK, seed=0)
        assert b.step(ADD).observation.text.startswith("TARGET") and jb.restarts == 0
    finally:
        b.close()


def test_a_jail_reused_after_its_last_program_left_starts_a_fresh_process() -> None:
    jail = Jail()
    p1 = jail.load(UPPER, ("filter_observation",), time_limit=0.25, max_ops=1000)
    first = jail.pid
    jail.unload(p1)
    assert jail.pid is None and first is not None and not alive(first)
    p2 = jail.load(UPPER, ("filter_observation",), time_limit=0.25, max_ops=1000)
    assert jail.pid not in (None, first)
    jail.unload(p2)


def test_the_cpu_limit_is_per_call_not_cumulative() -> None:
    """Calls each using about half the limit: each gets a fresh CPU timer, so together
    they pass one call's limit without a kill."""
    code = ("import math\ndef filter_action(action, state, memo):\n"
            "    return Block(reason=str(math.factorial(memo.get('k', 100)).bit_length()))\n")
    env = make(code, time_limit_ms=200)
    jail = env._jail  # type: ignore[attr-defined]
    try:
        env.reset(task=TASK, seed=0)
        k = 1000
        while jail.last_cpu_s < 0.08:
            env.memo["k"] = k = int(k * (2 if jail.last_cpu_s < 0.03 else 1.25))
            env.step(ADD)
        assert jail.last_cpu_s < 0.2
        used = []
        for _ in range(8):  # one call's CPU varies with the machine's load (0.05-0.08 s here)
            env.step(ADD)
            used.append(jail.last_cpu_s)
        assert sum(used) > 0.2 + 0.1 and jail.restarts == 0, used
    finally:
        env.close()


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
@pytest.mark.parametrize("code, match", [
    ("def filter_action(action, state, memo):\n    return 'combine'\n", "Action, Block or None; got str"),
    ("def filter_observation(observation, state, memo):\n    return 3\n", "Observation, str or None; got int"),
    ("def modify_transition(action, response, state, memo):\n    return observation\n", "NameError"),
    ("def modify_transition(action, response, state, memo):\n    return evolve(response, reward=5.0)\n",
     "changed the reward"),
    ("def modify_transition(action, response, state, memo):\n    return action\n",
     "EnvResponse or None; got Action"),
])
def test_the_fused_step_keeps_every_check(trust: str, code: str, match: str) -> None:
    """The trusted tier's fused step and the jailed step refuse the same wrong answers."""
    env = make(code, trust)
    try:
        with pytest.raises(ContractCodeError, match=match):
            env.reset(task=TASK, seed=0)  # filter_observation runs at reset too
            env.step(ADD)
    finally:
        env.close()


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_the_fused_step_records_what_the_hooks_did(trust: str) -> None:
    code = ("def filter_action(action, state, memo):\n"
            "    if action.args['op'] == 'sub':\n        return Block(reason='no sub')\n"
            "    if action.args['op'] == 'mul':\n        return Action('combine', {'i': 0, 'j': 1, 'op': 'add'})\n"
            "def modify_transition(action, response, state, memo):\n"
            "    return evolve(response, terminated=True)\n"
            "def filter_observation(observation, state, memo):\n    return observation.text + '!'\n")
    env = make(code, trust)
    try:
        env.reset(task=TASK, seed=0)
        blocked = env.step(Action(tool="combine", args={"i": 0, "j": 1, "op": "sub"}))
        eff = blocked.info["envh"][-1]
        assert eff["action"] == "blocked" and eff["reason"] == "no sub" and eff["transition"] is False
        rewritten = env.step(Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}))
        eff = rewritten.info["envh"][-1]
        assert eff["action"] == "rewritten" and eff["sent"] == {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}
        assert eff["transition"] is True and rewritten.terminated is True and eff["observation"] is True
        assert rewritten.observation.text == eff["observation_before"]["text"] + "!"
        assert "5" in rewritten.observation.text  # 2 + 3 ran in the base env, not 2 * 3
    finally:
        env.close()


def _children() -> set[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return {int(p) for p in fh.read().split()}
    except OSError:
        return set()


def test_trusted_hooks_still_get_read_only_records_through_the_fused_step() -> None:
    """dict.update on the args, the data and the info a hook is handed: refused, and the
    base env ran the action as proposed."""
    code = ("def filter_action(action, state, memo):\n"
            "    try:\n        dict.update(action.args, {'op': 'mul'})\n"
            "    except TypeError:\n        memo['a'] = 'refused'\n"
            "def modify_transition(action, response, state, memo):\n"
            "    try:\n        dict.update(response.info, {'forged': True})\n"
            "    except TypeError:\n        memo['i'] = 'refused'\n"
            "def filter_observation(observation, state, memo):\n"
            "    try:\n        dict.update(observation.data, {'target': 1})\n"
            "    except TypeError:\n        memo['d'] = 'refused'\n")
    env = make(code, "trusted")
    t0 = time.monotonic()
    try:
        env.reset(task=TASK, seed=0)
        resp = env.step(ADD)
        assert env.memo == {"a": "refused", "i": "refused", "d": "refused"}
        assert "forged" not in resp.info and resp.observation.data["target"] == 24
        assert "5" in resp.observation.text and isinstance(env, CodeContract)
    finally:
        env.close()
    assert time.monotonic() - t0 < 30


def test_the_wall_clock_backstop_still_ends_a_call_whose_cpu_timer_never_fires() -> None:
    """Code that escaped the sandbox inside the jail could disarm its CPU timer: the host's
    wall-clock limit still ends the call (here a call sent with a CPU budget of 100 s)."""
    jail = Jail()
    hang = "import math\ndef filter_action(action, state, memo):\n    return math.factorial(10**8)\n"
    pid = jail.load(hang, ("filter_action",), time_limit=0.1, max_ops=1000)
    try:
        t0 = time.monotonic()
        with pytest.raises(ContractCodeError, match="wall-clock limit of 500 ms"):
            jail.request({"op": "call", "id": pid, "hook": "filter_action", "args": [
                {"t": "Action", "tool": "x", "args": {}}], "state": None, "memo": {}, "cpu_s": 100},
                wall=0.5, hook="filter_action", cpu=100.0)
        assert time.monotonic() - t0 < 5 and jail.restarts == 1
    finally:
        jail.close()


def test_a_jail_killed_from_outside_between_calls_comes_back() -> None:
    env = make(UPPER)
    try:
        env.reset(task=TASK, seed=0)
        jail = env._jail  # type: ignore[attr-defined]
        os.kill(jail.pid, 9)
        time.sleep(0.2)  # bubblewrap's children die with it
        assert env.step(ADD).observation.text.startswith("TARGET")
        assert jail.restarts == 1
    finally:
        env.close()


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_a_non_action_goes_through_the_generic_step_and_its_checks(trust: str) -> None:
    env = make("def filter_action(action, state, memo):\n    return Block(reason='never')\n", trust)
    try:
        env.reset(task=TASK, seed=0)
        resp = env.step({"tool": "combine"})  # type: ignore[arg-type]
        assert resp.info["error"]["type"] == "invalid_action"
        assert resp.info["envh"][-1]["action"] == "passed"  # the hook never saw it
    finally:
        env.close()


def test_closing_twice_and_collecting_after_close_is_quiet() -> None:
    env = make(UPPER)
    pid = env._jail.pid  # type: ignore[attr-defined]
    env.close()
    env.close()
    del env
    gc.collect()
    assert pid is not None and not alive(pid)


def test_a_spec_cannot_start_jail_processes_without_bound(monkeypatch) -> None:
    """A chain of many legs, each with its own contract, would start one jail per leg: its
    legs share the spec's jails (one, when half the process's are taken). Past
    ``MAX_LIVE`` live jails building another spec is a typed error, and a closed stack
    gives its slot back."""
    from envh.errors import JailError
    from envh.jail import process

    monkeypatch.setattr(process, "MAX_LIVE", len(process._live) + 2)
    leg = {"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}
    before = _children()
    with envh.make({"bridge": "toy24", "layers": [{"kind": "chain", "legs": [leg] * 5}]}, trust="untrusted"):
        assert len(_children() - before) <= 1
    gc.collect()
    assert _children() <= before
    a, b = make(UPPER), make(UPPER + "# b\n")  # two specs: a jail each
    try:
        with pytest.raises(JailError, match="limit is"):
            make(UPPER + "# c\n")
        a.close()
        make(UPPER + "# c\n").close()  # a closed stack gave its slot back
    finally:
        a.close()
        b.close()


def test_stacks_dropped_in_a_reference_cycle_do_not_use_up_the_jail_limit(monkeypatch) -> None:
    from envh.jail import process

    monkeypatch.setattr(process, "MAX_LIVE", len(process._live) + 1)
    gc.disable()
    try:
        env = make(UPPER)
        env.cycle = env  # type: ignore[attr-defined]  # only the cycle collector frees it
        del env
        make(UPPER).close()  # the limit collects the dropped stack before refusing
    finally:
        gc.enable()


def test_decoding_a_huge_call_counts_against_its_cpu_limit() -> None:
    """The call's memo is decoded under the CPU timer too (it was decoded before the timer
    was armed): a hook that does nothing with a 30 MB memo is charged the decoding."""
    env = make("def filter_action(action, state, memo):\n    return None\n")
    jail = env._jail  # type: ignore[attr-defined]
    try:
        env.reset(task=TASK, seed=0)
        env.step(ADD)
        small = jail.last_cpu_s
        env.memo["x"] = "\x00" * 5_000_000  # 30 MB as JSON
        env.step(ADD)
        assert small < 0.005 and jail.last_cpu_s > 0.01, (small, jail.last_cpu_s)
    finally:
        env.close()


def test_code_with_a_class_pattern_gets_the_frozen_response() -> None:
    """Attack note (round 3): ``case T(info=i)`` reads an attribute without ``.info`` in
    the source; no class matching a record is reachable today, but code holding a class
    pattern is handed the frozen copy of the response all the same."""
    code = ("def modify_transition(action, response, state, memo):\n"
            "    match response:\n        case str(x):\n            memo['s'] = x\n")
    env = make(code, "trusted")
    try:
        assert env._reads_info is True  # type: ignore[attr-defined]
        env.reset(task=TASK, seed=0)
        assert env.step(ADD).info["envh"][-1]["transition"] is False
    finally:
        env.close()
    plain = make("def modify_transition(action, response, state, memo):\n    return None\n", "trusted")
    assert plain._reads_info is False  # type: ignore[attr-defined]
    plain.close()
