"""The contract kind: f_A / f_T / f_O from untrusted code, and what such code may not do."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh.errors import ContractCodeError, SealedVerifierError, SpecError

TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})


def contract(code: str, **extra: object) -> envh.ActionableEnv:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code, **extra}]})
    env.reset(task=TASK, seed=0)
    return env


def test_block_does_not_step_the_env_and_says_why() -> None:
    env = contract("def filter_action(action, state, memo):\n"
                   "    if action.tool == 'combine' and action.args['op'] == 'add':\n"
                   "        return Block(reason='no adding')\n")
    resp = env.step(ADD)
    assert resp.observation.text == "Action blocked: no adding"
    assert resp.info["error"] == {"type": "blocked", "message": "no adding"}
    assert resp.info["envh"][-1]["action"] == "blocked"
    assert env.get_env_state()["steps"] == 0 and env.get_env_state()["history"] == []


def test_rewrite_transition_and_observation_are_recorded() -> None:
    env = contract(
        "def filter_action(action, state, memo):\n"
        "    return Action(tool='combine', args={'i': 0, 'j': 1, 'op': 'mul'})\n"
        "def modify_transition(action, response, state, memo):\n"
        "    memo['n'] = memo.get('n', 0) + 1\n"
        "    return evolve(response, info={**response.info, 'n': memo['n']})\n"
        "def filter_observation(observation, state, memo):\n"
        "    return observation.text.upper()\n")
    resp = env.step(ADD)
    effect = resp.info["envh"][-1]
    assert effect["action"] == "rewritten" and effect["sent"]["args"]["op"] == "mul"
    assert effect["transition"] is True and effect["observation"] is True
    assert resp.info["n"] == 1 and env.get_env_state()["numbers"] == ["4", "6"]
    assert resp.observation.text.startswith("TARGET: 24")


def test_memo_lives_for_one_episode() -> None:
    env = contract("def filter_observation(observation, state, memo):\n"
                   "    memo['k'] = memo.get('k', 0) + 1\n"
                   "    return str(memo['k'])\n")
    env.step(ADD)
    assert env.observe().text == "2"
    assert env.reset(task=TASK, seed=0).observation.text == "1"


@pytest.mark.parametrize(("code", "message"), [
    ("def filter_action(action, state, memo):\n    state['numbers'] = []\n", "does not support item assignment"),
    ("def filter_action(action, state, memo):\n    state['history'][0] = 1\n", "TypeError"),
    ("def filter_action(action, state, memo):\n    state.clear()\n", "no attribute 'clear'"),
    ("def filter_action(action, state, memo):\n    action.args['i'] = 5\n", "TypeError"),
])
def test_state_and_action_are_read_only(code: str, message: str) -> None:
    env = contract(code)
    with pytest.raises(ContractCodeError, match=message) as info:
        env.step(ADD)
    assert info.value.hook == "filter_action" and info.value.lineno == 2
    assert env.unwrapped.get_env_state()["numbers"] == ["2", "3", "4"]


def test_changing_the_reward_is_rejected() -> None:
    env = contract("def modify_transition(action, response, state, memo):\n"
                   "    return evolve(response, reward=100.0)\n")
    with pytest.raises(ContractCodeError, match="changed the reward") as info:
        env.step(ADD)
    assert info.value.hook == "modify_transition"


@pytest.mark.parametrize(("hook", "body", "expected"), [
    ("filter_action", "return 'stop'", "must return Action, Block or None; got str"),
    ("modify_transition", "return {'reward': 1}", "must return EnvResponse or None; got dict"),
    ("filter_observation", "return 42", "must return Observation, str or None; got int"),
])
def test_wrong_return_types_are_named(hook: str, body: str, expected: str) -> None:
    params = {"filter_action": "action, state, memo", "modify_transition": "action, response, state, memo",
              "filter_observation": "observation, state, memo"}[hook]
    env = contract(f"def {hook}({params}):\n    {body}\n") if hook != "filter_observation" else None
    if env is None:
        with pytest.raises(ContractCodeError, match=expected):
            contract(f"def {hook}({params}):\n    {body}\n")
        return
    with pytest.raises(ContractCodeError, match=expected) as info:
        env.step(ADD)
    assert info.value.hook == hook


@pytest.mark.parametrize(("code", "message"), [
    ("def evaluate():\n    return True\n", "the verifier is sealed"),
    ("x = 1\n", "defines none of filter_action"),
    ("len('hi')\n", "only imports, constants and function definitions"),
    ("def filter_action(action, state, memo):\n    action.tool = 'stop'\n", "assigning or deleting attribute"),
    ("def filter_action(action, state, memo)\n    return action\n", "syntax error"),
])
def test_bad_programs_fail_at_build(code: str, message: str) -> None:
    with pytest.raises(ContractCodeError, match=message):
        envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]})


def test_contract_needs_exactly_one_source() -> None:
    with pytest.raises(SpecError, match="exactly one of 'code' or 'cls'"):
        envh.parse_spec({"bridge": "toy24", "layers": [{"kind": "contract"}]})


def test_reward_change_in_a_python_contract_is_sealed_too() -> None:
    class Generous(envh.EnvHarness):
        kind = "generous"

        def modify_transition(self, action, response, state):
            return type(response)(observation=response.observation, reward=1.0)

    from envh.bridges.toy24 import Toy24Env

    env = Generous(Toy24Env())
    env.reset(task=TASK)
    with pytest.raises(SealedVerifierError, match="changed the reward"):
        env.step(ADD)


def test_the_verifier_is_unreachable_from_code() -> None:
    for code in ("def filter_action(action, state, memo):\n    return state.evaluate()\n",
                 "def filter_action(action, state, memo):\n    return evaluate\n"):
        with pytest.raises(ContractCodeError):
            contract(code).step(ADD)


def test_a_failing_hook_leaves_other_episodes_alone() -> None:
    bad = contract("def filter_observation(observation, state, memo):\n"
                   "    if memo.get('armed'):\n        return 1 / 0\n    memo['armed'] = True\n")
    with pytest.raises(ContractCodeError):
        bad.step(ADD)
    good = envh.make({"bridge": "toy24"})
    good.reset(task=TASK)
    assert good.step(ADD).observation.text.startswith("Target: 24. Numbers: [0] 4, [1] 5")
