"""Attacks on the merged exchange after a step (``Jail.call_then``: modify_transition then
filter_observation in one round trip), on reading an answer in one read, on writing the
call before the jail is continued, and on the host's spin while it waits.

The jail is hostile: whatever it answers, the host must never accept a reward the
benchmark did not give, must fail only with a typed ``ContractCodeError``, must not read
unbounded data, and must give the same observations, rewards, flags, info and memo
(``layer_state``) as the trusted tier for the same spec.

Each test asserts the secure or correct behaviour. These failed when written and were
fixed: a message the jail queued behind a long answer taken as the next call's answer (the
pipe is now checked empty before each call); the memo a failing hook left lost in the jail
while the trusted tier keeps it (the jail's error answer carries the memo); an integer
reward past the float range raising a bare ``OverflowError``; ``-0.0`` or an int accepted
for the benchmark's ``0.0`` and passed on (the live reward is kept); a C-level hang in
``modify_transition`` getting the CPU of two hooks in the merged exchange (each hook is
armed its own limit); and a forged answer to a load raising a bare ``KeyError``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from typing import Any

import envh
import pytest
from envh import Action, Block, TaskRef
from envh.components.contract import HOOKS, MAX_OPS, CodeContract
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path, process, wire
from proctools import descendants

TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
MUL = Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"})
STOP = Action(tool="stop", args={})

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")

#: What the host's static check sees for a contract whose program in the jail is swapped
#: for one that only a broken sandbox would run (both hooks: the merged exchange).
BOTH = ("def modify_transition(action, response, state, memo):\n    return None\n"
        "def filter_observation(observation, state, memo):\n    return None\n")


def on_broken(jail: Jail, program: str, time_limit: float = 0.25) -> CodeContract:
    """A real untrusted contract layer over toy24 whose program in ``jail`` (the ``broken``
    fixture's) is ``program``: the host checks everything it answers as in production."""
    inner = envh.make({"bridge": "toy24"})
    layer = CodeContract(inner, BOTH, trust="untrusted", jail=jail, time_limit=time_limit)
    layer._program = jail.load(program, HOOKS, time_limit=time_limit, max_ops=MAX_OPS)
    layer.reset(task=TASK, seed=0)
    return layer


#: modify_transition answers the host with ``REPLY``'s message (written by hand to the
#: answer pipe) and the process ends: the answer is whatever a lying jail wants.
FORGE = """import os, struct, json
def _send(obj):
    body = json.dumps(obj).encode()
    data = struct.pack('>I', len(body)) + body
    for fd in range(3, 8):
        try:
            os.write(fd, data)
        except OSError:
            pass
    os._exit(0)
def modify_transition(action, response, state, memo):
    _send(REPLY)
def filter_observation(observation, state, memo):
    return None
"""


def forged(reply: dict[str, Any]) -> str:
    return f"import json\nREPLY = json.loads({json.dumps(reply)!r})\n" + FORGE


def obs(text: str = "forged") -> dict[str, Any]:
    return {"t": "Observation", "text": text, "data": {}}


def response(reward: Any, text: str = "forged") -> dict[str, Any]:
    return {"t": "EnvResponse", "observation": obs(text), "reward": reward, "terminated": False,
            "truncated": False, "info": {}}


# -- 1. the first answer changes the reward: nothing of the exchange stands -------------------------
@pytest.mark.parametrize("reward", [1.0, 24, -1.0, float("inf"), float("nan"), "0.0", True, None],
                         ids=["one", "int", "negative", "inf", "nan", "str", "bool", "null"])
def test_a_forged_then_beside_a_changed_reward_is_refused(broken: Jail, reward: Any) -> None:
    """The jail answers with a ``then`` although its ``out`` changed the reward (toy24's
    step reward is 0.0): the host refuses the step, whatever ``then`` says."""
    layer = on_broken(broken, forged({"out": response(reward), "then": {"t": "value", "value": "WIN"},
                                      "memo": {}}))
    try:
        with pytest.raises(ContractCodeError, match="changed the reward|malformed") as info:
            layer.step(ADD)
        assert info.value.hook == "modify_transition"  # refused on its merits: the jail was not lost
    finally:
        layer.close()


PATCHED_WORKER = """import sys
# the worker itself changed: it runs filter_observation after any answer
sys.modules['envh.jail.worker']._observation_after = lambda out, resp, t: out.observation
def modify_transition(action, response, state, memo):
    memo['mt'] = 1
    return evolve(response, reward=response.reward + 1.0,
                  observation=Observation(text='changed', data={}))
def filter_observation(observation, state, memo):
    memo['fo'] = 1
    return 'WIN ' + observation.text
"""


def test_a_worker_that_runs_the_second_hook_after_a_refused_first_is_still_refused(broken: Jail) -> None:
    layer = on_broken(broken, PATCHED_WORKER)
    try:
        with pytest.raises(ContractCodeError, match="changed the reward") as info:
            layer.step(ADD)
        assert info.value.hook == "modify_transition"
    finally:
        layer.close()


def test_an_equal_looking_first_answer_cannot_carry_another_reward(broken: Jail) -> None:
    """``out`` repeats the benchmark's observation word for word with a different reward:
    the host's equality shortcut compares its own encoding, reward included."""
    inner = envh.make({"bridge": "toy24"})
    inner.reset(task=TASK, seed=0)
    real = wire.encode(inner.step(ADD))
    inner.close()
    lie = {**real, "reward": 1.0}
    layer = on_broken(broken, forged({"out": lie, "then": {"t": "value", "value": None}, "memo": {}}))
    try:
        with pytest.raises(ContractCodeError, match="changed the reward"):
            layer.step(ADD)
    finally:
        layer.close()


# -- 2. malformed, missing or huge second answers: typed errors, bounded reads ------------------------
@pytest.mark.parametrize("then", [
    3, [], None, "text", {"t": "value", "value": 5}, {"t": "Action", "tool": "stop", "args": {}},
    response(0.0), {"t": "other", "type": "evil"}, {"t": "Observation", "text": "x", "data": []},
    {"t": "os.system"},
], ids=["int", "list", "null", "bare-str", "value-int", "action", "envresponse", "other", "bad-data", "tag"])
def test_a_malformed_then_is_a_typed_error(broken: Jail, then: Any) -> None:
    layer = on_broken(broken, forged({"out": {"t": "value", "value": None}, "then": then, "memo": {}}))
    try:
        with pytest.raises(ContractCodeError, match="must return|malformed") as info:
            layer.step(ADD)
        assert info.value.hook == "filter_observation"  # refused on its merits: the jail was not lost
    finally:
        layer.close()


def test_a_missing_then_after_an_accepted_first_answer_is_a_typed_error(broken: Jail) -> None:
    layer = on_broken(broken, forged({"out": {"t": "value", "value": None}, "memo": {}}))
    try:
        with pytest.raises(ContractCodeError, match="did not run filter_observation"):
            layer.step(ADD)
    finally:
        layer.close()


def test_extra_keys_and_a_lying_cpu_report_change_nothing(broken: Jail) -> None:
    layer = on_broken(broken, forged({"out": {"t": "value", "value": None}, "then": {"t": "value", "value": "ok"},
                                      "memo": {"m": 1}, "cpu_used": 1e308, "reward": 99.0,
                                      "then2": response(5.0), "hooks": ["x"]}))
    try:
        resp = layer.step(ADD)
        assert resp.reward == 0.0 and resp.observation.text == "ok" and layer.memo == {"m": 1}
    finally:
        layer.close()


@pytest.mark.parametrize("what", ["items", "declared-size"])
def test_a_huge_then_is_refused_before_it_is_decoded(broken: Jail, what: str) -> None:
    if what == "items":  # 600 000 JSON values in ~1.2 MB: past MAX_ITEMS
        program = forged({"out": {"t": "value", "value": None}, "memo": {}, "then": [0] * 600_000})
    else:  # a header announcing more than MAX_MESSAGE bytes, then silence
        program = ("import os, struct, time\ndef modify_transition(action, response, state, memo):\n"
                   "    for fd in range(3, 8):\n        try:\n"
                   f"            os.write(fd, struct.pack('>I', {wire.MAX_MESSAGE + 1}) + b'{{')\n"
                   "        except OSError:\n            pass\n    time.sleep(3600)\n"
                   "def filter_observation(observation, state, memo):\n    return None\n")
    layer = on_broken(broken, program)
    try:
        t0 = time.monotonic()
        with pytest.raises(ContractCodeError, match="limit|restarted"):
            layer.step(ADD)
        assert time.monotonic() - t0 < 2.0  # refused at once, not at the wall-clock limit
        assert broken.restarts == 1
    finally:
        layer.close()


# -- 3. a jail that dies between the two hooks -----------------------------------------------------
DIES_BETWEEN = """import os, sys
def _die(out, resp, t):
    os._exit(0)
sys.modules['envh.jail.worker']._observation_after = _die
def modify_transition(action, response, state, memo):
    memo['mt'] = 1
def filter_observation(observation, state, memo):
    return 'seen'
"""


def test_a_jail_that_exits_between_the_two_hooks_is_a_typed_error_and_comes_back(broken: Jail) -> None:
    layer = on_broken(broken, DIES_BETWEEN)
    try:
        with pytest.raises(ContractCodeError, match="restarted") as info:
            layer.step(ADD)
        assert info.value.hook == "modify_transition, filter_observation"
        assert broken.restarts == 1 and layer.memo == {}
        # the next step restarts the jail, reloads the program, and fails the same way: typed
        with pytest.raises(ContractCodeError, match="restarted"):
            layer.step(ADD)
    finally:
        layer.close()


# -- 4. one answer, then another: the next call must not read the stale one --------------------------
STALE = """import os, struct, json, time
def _frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack('>I', len(body)) + body
def filter_action(action, state, memo):
    big = _frame({'out': {'t': 'value', 'value': None}, 'memo': {'pad': 'x' * 200000}})
    stale = _frame({'out': {'t': 'Block', 'reason': 'stale'}, 'memo': {}})
    for fd in range(3, 8):
        try:
            os.write(fd, big + stale)
        except OSError:
            pass
    time.sleep(3600)
"""


def test_a_small_message_after_a_small_answer_is_caught(broken: Jail) -> None:
    """(The round-trip tests cover this too.) Both in one read: a protocol error."""
    program = broken.load("import os, struct\ndef filter_action(action, state, memo):\n"
                          "    b = b'{\"out\":{\"t\":\"value\",\"value\":null},\"memo\":{}}'\n"
                          "    m = struct.pack('>I', len(b)) + b\n"
                          "    for fd in range(3, 8):\n        try:\n            os.write(fd, m + m)\n"
                          "        except OSError:\n            pass\n    os._exit(0)\n",
                          ("filter_action",), time_limit=0.25, max_ops=10_000)
    with pytest.raises(ContractCodeError, match="restarted"):
        broken.call(program, "filter_action", [wire.encode(ADD)], None, {}, 0.25)


def test_a_message_queued_behind_a_long_answer_is_never_taken_as_the_next_answer(broken: Jail) -> None:
    program = broken.load(STALE, ("filter_action",), time_limit=0.1, max_ops=10_000)
    accepted: list[Any] = []
    for _ in range(2):
        try:
            out, _memo = broken.call(program, "filter_action", [wire.encode(ADD)], None, {}, 0.1)
            accepted.append(out)
        except ContractCodeError:
            pass
    stale = [o for o in accepted if isinstance(o, Block) and o.reason == "stale"]
    assert not stale, "a message the jail wrote before it read the call was taken as that call's answer"


# -- 5. memo and answers: the same as the trusted tier ---------------------------------------------
def play(trust: str, code: str, actions: tuple[Action, ...] = (ADD, ADD)) -> list[Any]:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code, "time_limit_ms": 100}]},
                    trust=trust)
    seen: list[Any] = []
    try:
        first = env.reset(task=TASK, seed=0)
        seen.append((first.observation, first.info, env.layer_state()))
        for action in actions:
            try:
                r = env.step(action)
                seen.append((r.observation, r.reward, r.terminated, r.truncated, r.info))
            except ContractCodeError as exc:
                seen.append(("error", exc.hook))
            seen.append(env.layer_state())
    finally:
        env.close()
    return seen


STATE_CODES = {
    "both-read-state": (
        "def modify_transition(action, response, state, memo):\n"
        "    memo['mt'] = list(state['numbers'])\n"
        "    return evolve(response, observation=Observation(text='[mt ' + str(len(state['numbers'])) + '] '\n"
        "                  + response.observation.text, data={'n': state['numbers']}), terminated=True)\n"
        "def filter_observation(observation, state, memo):\n"
        "    memo['fo'] = list(state['numbers'])\n"
        "    return observation.text + ' | ' + str(state['numbers']) + ' ' + str(observation.data)\n"),
    "second-reads-state": (
        "def modify_transition(action, response, state, memo):\n"
        "    memo['mt'] = memo.get('mt', 0) + 1\n"
        "def filter_observation(observation, state, memo):\n"
        "    return Observation(text=str(state['numbers']) + str(memo), data={'k': state['steps']})\n"),
    "first-reads-state": (
        "def modify_transition(action, response, state, memo):\n"
        "    i = dict(response.info)\n    i['n'] = len(state['numbers'])\n"
        "    return evolve(response, info=i)\n"
        "def filter_observation(observation, state, memo):\n"
        "    return observation.text\n"),
    "second-unchanged": (
        "def modify_transition(action, response, state, memo):\n"
        "    return evolve(response, truncated=True)\n"
        "def filter_observation(observation, state, memo):\n"
        "    return observation\n"),
}


@pytest.mark.parametrize("name", sorted(STATE_CODES))
def test_the_merged_exchange_answers_as_the_trusted_tier(name: str) -> None:
    code = STATE_CODES[name]
    actions = (MUL, MUL, STOP)
    assert play("untrusted", code, actions) == play("trusted", code, actions)


SECOND_FAILS = ("def modify_transition(action, response, state, memo):\n"
                "    memo['mt'] = memo.get('mt', 0) + 1\n"
                "def filter_observation(observation, state, memo):\n"
                "    if memo.get('mt'):\n{body}")


@pytest.mark.parametrize("body", ["        raise ValueError('no')\n", "        while True:\n            pass\n"],
                         ids=["raises", "hangs"])
def test_a_failing_second_hook_keeps_the_first_hooks_memo(body: str) -> None:
    seen = play("untrusted", SECOND_FAILS.format(body=body), (ADD,))
    assert seen[1][0] == "error" and seen[2] == {"mt": 1}, seen


@pytest.mark.parametrize("code", [
    SECOND_FAILS.format(body="        memo['fo'] = 1\n        raise ValueError('no')\n"),
    "def modify_transition(action, response, state, memo):\n    memo['mt'] = 1\n    raise ValueError('no')\n"
    "def filter_observation(observation, state, memo):\n    return None\n",
], ids=["second-fails", "first-fails"])
def test_a_failing_hook_leaves_the_same_memo_in_both_tiers(code: str) -> None:
    assert play("untrusted", code, (ADD,)) == play("trusted", code, (ADD,))


# -- 6. rewards: never another value, never an untyped failure --------------------------------------
@pytest.mark.parametrize("code", [
    "def modify_transition(action, response, state, memo):\n    return evolve(response, reward=10**400)\n"
    "def filter_observation(observation, state, memo):\n    return None\n",
    "def modify_transition(action, response, state, memo):\n    return None\n"
    "def filter_observation(observation, state, memo):\n"
    "    if memo.get('armed'):\n"
    "        return EnvResponse(observation=observation, reward=10**400)\n"
    "    memo['armed'] = True\n",
], ids=["out", "then"])
def test_an_integer_reward_past_float_range_is_a_typed_error(code: str) -> None:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]})
    try:
        env.reset(task=TASK, seed=0)
        with pytest.raises(ContractCodeError):
            env.step(ADD)
    finally:
        env.close()


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
@pytest.mark.parametrize("expr", [
    "-response.reward",
    "response.reward",
], ids=["negative-zero", "same"])
def test_an_accepted_transition_carries_the_benchmarks_reward_bit_for_bit(trust: str, expr: str) -> None:
    code = ("def modify_transition(action, response, state, memo):\n"
            f"    return evolve(response, reward={expr}, terminated=True)\n"
            "def filter_observation(observation, state, memo):\n    return None\n")
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust=trust)
    try:
        env.reset(task=TASK, seed=0)
        r = env.step(ADD)
        assert r.terminated and type(r.reward) is float and math.copysign(1.0, r.reward) == 1.0 and r.reward == 0.0
    finally:
        env.close()


def test_an_int_reward_comes_back_as_the_benchmarks_float_in_both_tiers() -> None:
    code = ("def modify_transition(action, response, state, memo):\n"
            "    return evolve(response, reward=int(response.reward), truncated=True)\n"
            "def filter_observation(observation, state, memo):\n    return None\n")
    rewards = []
    for trust in ("untrusted", "trusted"):
        env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust=trust)
        try:
            env.reset(task=TASK, seed=0)
            rewards.append(env.step(ADD).reward)
        finally:
            env.close()
    assert [type(r) for r in rewards] == [float, float], rewards


# -- 7. limits of the merged exchange -----------------------------------------------------------------
def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _weigh(pid: int, nice: int) -> None:
    os.setpriority(os.PRIO_PROCESS, pid, nice)
    try:
        with open(f"/proc/{pid}/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:
        pass


def jail_cpu_during(env: Any, fn: Any) -> tuple[float, Any]:
    """The most CPU seconds the jail's processes used during ``fn()`` (sampled every 5 ms
    until they die), and what ``fn`` raised or returned."""
    jail = env._jail
    assert jail.pid is not None
    pids = [jail.pid, *descendants(jail.pid)]
    for pid in pids:
        _weigh(pid, -20)  # the test machine is shared: the jail gets a CPU when it wants one
    base = {p: _cpu_s(p) for p in pids}
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                peak[0] = max(peak[0], sum(_cpu_s(p) - base[p] for p in pids))
            except (OSError, ValueError, IndexError):
                pass
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        outcome: Any = fn()
    except BaseException as exc:  # noqa: BLE001 - handed back
        outcome = exc
    done.set()
    sampler.join()
    return peak[0], outcome


def step_cpu(code: str, limit: float) -> tuple[float, Any]:
    """One Toy24 step through a jailed contract of ``code`` with a ``limit`` s time limit:
    the jail's CPU during the step, and what the step raised or returned."""
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code, "time_limit_ms": limit * 1000}]})
    try:
        env.reset(task=TASK, seed=0)
        return jail_cpu_during(env, lambda: env.step(ADD))
    finally:
        env.close()


def test_a_c_level_hang_in_the_first_hook_ends_at_one_hooks_cpu_limit() -> None:
    limit = 0.3
    code = ("import math\ndef modify_transition(action, response, state, memo):\n"
            "    memo['x'] = math.factorial(10**8)\n"
            "def filter_observation(observation, state, memo):\n    return None\n")
    used, outcome = step_cpu(code, limit)
    assert isinstance(outcome, ContractCodeError), outcome
    assert used < limit + process.GRACE_S + 0.15, f"modify_transition used {used:.2f} s of CPU"


def test_a_c_level_hang_in_the_second_hook_is_bounded_by_the_exchange() -> None:
    """The first hook returns at once, the second never does: killed (typed, named for the
    exchange) within the exchange's CPU limit, 2 x time_limit + grace."""
    limit = 0.2
    code = ("import math\ndef modify_transition(action, response, state, memo):\n    memo['a'] = 1\n"
            "def filter_observation(observation, state, memo):\n"
            "    if memo.get('a'):\n        memo['x'] = math.factorial(10**8)\n")
    used, outcome = step_cpu(code, limit)
    assert isinstance(outcome, ContractCodeError), outcome
    assert "filter_observation" in str(outcome.hook) and "jail process" in outcome.message
    assert used < 2 * limit + process.GRACE_S + 0.15, used


def test_the_host_sleeps_while_the_merged_exchange_runs() -> None:
    """Two slow hooks in one exchange (~0.2 s of jail CPU): the host's own CPU stays small
    (it spins for ``SPIN_S`` at most, then sleeps in poll)."""
    slow = ("def spin():\n    n = 0\n    for i in range(60_000):\n        n += len(('x' * 2000).upper())\n"
            "    return n\n"
            "def modify_transition(action, response, state, memo):\n    memo['a'] = spin()\n"
            "def filter_observation(observation, state, memo):\n    memo['b'] = spin()\n")
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": slow, "time_limit_ms": 1000}]})
    try:
        env.reset(task=TASK, seed=0)
        t0, c0 = time.perf_counter(), time.process_time()
        env.step(ADD)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert env.layer_state() == {"a": 120_000_000, "b": 120_000_000}
    finally:
        env.close()
    assert process.SPIN_S <= 0.001
    assert wall > 0.1, "the hooks were meant to take a while"
    assert cpu < 0.01 + wall / 10, f"the host used {cpu * 1000:.0f} ms of CPU waiting {wall * 1000:.0f} ms"


def test_a_call_larger_than_the_pipe_is_written_whole_to_a_stopped_then_continued_jail() -> None:
    """The call is written while the jail is stopped (what fits in the pipe), the rest after
    SIGCONT: a 1 MB memo through the merged exchange arrives whole, both tiers alike."""
    code = ("def modify_transition(action, response, state, memo):\n"
            "    memo['n'] = memo.get('n', 0) + len(memo.get('pad', ''))\n"
            "def filter_observation(observation, state, memo):\n"
            "    if 'pad' not in memo:\n        memo['pad'] = 'p' * 1_000_000\n"
            "    return observation.text[:10] + str(memo.get('n', 0))\n")
    assert play("untrusted", code, (ADD, ADD, ADD)) == play("trusted", code, (ADD, ADD, ADD))


# -- 8. (not of this change) the load answer is not checked ---------------------------------------------
@pytest.mark.parametrize("reply", [b"{}", b'{"hooks":5}'], ids=["missing", "int"])
def test_a_forged_load_answer_is_a_typed_error(broken: Jail, reply: bytes) -> None:
    program = ("import os, struct\n"
               f"_b = {reply!r}\n"
               "for _fd in range(3, 8):\n    try:\n        os.write(_fd, struct.pack('>I', len(_b)) + _b)\n"
               "    except OSError:\n        pass\nos._exit(0)\n")
    with pytest.raises(ContractCodeError):
        broken.load(program, ("filter_action",), time_limit=0.25, max_ops=10_000)
