"""What one step of a jailed contract costs in exchanges with the jail, and that the
shortcuts taken for it answer exactly as the separate calls did (issue 24: the jailed
default's cost on ALFWorld).

After the benchmark's own step, ``modify_transition`` and ``filter_observation`` go to the
jail in one exchange; each answer is checked by the host as before, and an answer the
host refuses means the second hook never ran, in both tiers. An answer is read with one
read where it fits, so a byte past its end is a lying jail, not the next answer.
"""

from __future__ import annotations

import os

import envh
import pytest
from envh import Action, TaskRef
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path, wire

TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")

ALL_THREE = """
def filter_action(action, state, memo):
    memo['fa'] = memo.get('fa', 0) + 1

def modify_transition(action, response, state, memo):
    memo['mt'] = memo.get('mt', 0) + 1
    return evolve(response, observation=Observation(text='[mt] ' + response.observation.text,
                                                    data=response.observation.data))

def filter_observation(observation, state, memo):
    memo['fo'] = memo.get('fo', 0) + 1
    return observation.text + ' | numbers ' + str(len(state['numbers'])) + ' | ' + str(memo.get('mt', 0))
"""


def exchanges(env: object) -> list[str]:
    """Record the hooks named in every exchange the contract's jail makes from now on."""
    jail: Jail = env._jail  # type: ignore[attr-defined]
    seen: list[str] = []
    real = jail._exchange

    def spy(proc, msg, wall, hook, cpu):  # type: ignore[no-untyped-def]
        seen.append(msg.get("hook", msg.get("op")) + ("+" + msg["then"] if "then" in msg else ""))
        return real(proc, msg, wall, hook, cpu)

    jail._exchange = spy  # type: ignore[method-assign]
    return seen


def play(trust: str, code: str, steps: int = 2) -> tuple[list[tuple[object, ...]], object, object]:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust=trust)
    try:
        env.reset(task=TASK, seed=0)
        seen = exchanges(env) if trust == "untrusted" else None
        out = [env.step(ADD) for _ in range(steps)]
        return [(r.observation, r.reward, r.terminated, r.info["envh"]) for r in out], env.layer_state(), seen
    finally:
        env.close()


def test_the_hooks_after_a_step_are_one_exchange_and_answer_as_the_trusted_tier() -> None:
    trusted, memo_t, _ = play("trusted", ALL_THREE)
    jailed, memo_j, seen = play("untrusted", ALL_THREE)
    assert jailed == trusted and memo_j == memo_t == {"fa": 2, "mt": 2, "fo": 3}  # fo: the reset too
    assert seen == ["filter_action", "modify_transition+filter_observation"] * 2
    text = jailed[0][0].text
    assert text.startswith("[mt] ") and text.endswith(" | 1"), text  # the second hook saw the first's answer


def test_a_step_with_only_one_of_the_two_hooks_is_one_exchange() -> None:
    only_mt = ALL_THREE.split("def filter_observation")[0]
    trusted, _, _ = play("trusted", only_mt)
    jailed, memo, seen = play("untrusted", only_mt)
    assert jailed == trusted and memo == {"fa": 2, "mt": 2}
    assert seen == ["filter_action", "modify_transition"] * 2


REWARD = """
def modify_transition(action, response, state, memo):
    memo['mt'] = 1
    return evolve(response, reward=response.reward + 1.0)

def filter_observation(observation, state, memo):
    memo['fo'] = memo.get('fo', 0) + 1
"""


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_a_refused_transition_runs_no_filter_observation(trust: str) -> None:
    """The host refuses a changed reward; the observation hook was never reached, in
    either tier (the jail does not run it on an answer the host will refuse)."""
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": REWARD}]}, trust=trust)
    try:
        env.reset(task=TASK, seed=0)
        with pytest.raises(ContractCodeError, match="changed the reward") as info:
            env.step(ADD)
        assert info.value.hook == "modify_transition"
        assert env.layer_state() == {"mt": 1, "fo": 1}  # fo from the reset's observation only
    finally:
        env.close()


@pytest.mark.parametrize(("body", "match"), [
    ("    raise ValueError('bad observation')", "bad observation"),
    ("    while True:\n        pass", "loop iterations|limit"),
    ("    return 3", "must return Observation, str or None"),
], ids=["raises", "hangs", "wrong-type"])
def test_the_second_hook_of_the_exchange_fails_typed_and_named(body: str, match: str) -> None:
    code = ("def modify_transition(action, response, state, memo):\n    memo['mt'] = 1\n"
            f"def filter_observation(observation, state, memo):\n    if not memo.get('mt'):\n        return\n"
            f"{body}\n")
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code, "time_limit_ms": 100}]})
    try:
        env.reset(task=TASK, seed=0)
        with pytest.raises(ContractCodeError, match=match) as info:
            env.step(ADD)
        assert "filter_observation" in str(info.value.hook)
        with pytest.raises(ContractCodeError, match=match):  # the jail answers the next step too
            env.step(ADD)
    finally:
        env.close()


def test_the_exchange_of_two_hooks_gets_the_time_of_two() -> None:
    """Each hook may use its whole limit: two slow but honest hooks in one exchange pass."""
    slow = ("def spin(memo):\n    n = 0\n    for i in range(2_000):\n        n += i\n    return n\n"
            "def modify_transition(action, response, state, memo):\n    memo['a'] = spin(memo)\n"
            "def filter_observation(observation, state, memo):\n    memo['b'] = spin(memo)\n")
    jailed, memo, seen = play("untrusted", slow, steps=1)
    assert memo == {"a": 1999000, "b": 1999000} and seen == ["modify_transition+filter_observation"]


# -- reading an answer ------------------------------------------------------------------------
TRAILING = """import os, struct
def filter_action(action, state, memo):
    body = b'{"out":{"t":"value","value":null},"memo":{}}'
    for fd in range(3, 8):
        try:
            os.write(fd, struct.pack('>I', len(body)) + body + b'{"more":1}')
        except OSError:
            pass
"""

SPLIT = """import os, struct, time
def filter_action(action, state, memo):
    body = b'{"out":{"t":"value","value":null},"memo":{"split":1}}'
    data = struct.pack('>I', len(body)) + body
    for fd in range(3, 8):
        try:
            os.write(fd, data[:2])
            time.sleep(0.05)
            os.write(fd, data[2:6])
            time.sleep(0.05)
            os.write(fd, data[6:])
        except OSError:
            pass
    os._exit(0)
"""


def test_bytes_after_an_answer_are_a_lying_jail(broken: Jail) -> None:
    program = broken.load(TRAILING, ("filter_action",), time_limit=0.25, max_ops=10_000)
    with pytest.raises(ContractCodeError, match="restarted"):
        broken.call(program, "filter_action", [wire.encode(ADD)], None, {}, 0.25)
    assert broken.restarts == 1


def test_an_answer_that_arrives_in_pieces_is_read_whole(broken: Jail) -> None:
    program = broken.load(SPLIT, ("filter_action",), time_limit=0.25, max_ops=10_000)
    out, memo = broken.call(program, "filter_action", [wire.encode(ADD)], None, {}, 0.25)
    assert out is None and memo == {"split": 1}


def test_the_host_waits_for_a_slow_hook_asleep() -> None:
    """The host polls for an answer awake only briefly (``process.SPIN_S``), then sleeps:
    a hook that takes a quarter of a second costs the host almost no CPU."""
    import time

    from envh.jail import process

    jail = Jail()
    try:
        # 1.5 M additions: about 0.23 s on an idle machine here (150 k took 0.02 s, too short
        # for the host's CPU to tell polling from sleeping); the limits leave room for a loaded one
        program = jail.load("def filter_action(action, state, memo):\n    n = 0\n"
                            "    for i in range(1_500_000):\n        n += i\n    memo['n'] = n\n",
                            ("filter_action",), time_limit=5.0, max_ops=10**7)
        t0, c0 = time.perf_counter(), time.process_time()
        _, memo = jail.call(program, "filter_action", [wire.encode(ADD)], None, {}, 5.0)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        jail.close()
    assert memo == {"n": sum(range(1_500_000))}  # the hook ran whole
    assert process.SPIN_S <= 0.001
    assert wall > 0.1, "the hook was meant to take a while"
    assert cpu < 0.01 + wall / 10, f"the host used {cpu * 1000:.0f} ms of CPU waiting {wall * 1000:.0f} ms"
