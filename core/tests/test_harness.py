"""EnvHarness laws: the empty stack is transparent, the verifier is sealed, and
components do not commute."""

from __future__ import annotations

import envh
import pytest
from envh import Action, EnvHarness, EvaluationResult, TaskRef
from envh.bridges.toy24 import CURATED, Toy24Env
from envh.components.contract import CodeContract
from envh.errors import ReplayError, SealedVerifierError
from hypothesis import given, settings
from hypothesis import strategies as st

TASKS = [TaskRef(suite="toy24", split=s, instance_id=i) for s in ("easy", "medium") for i in CURATED[s][:4]]
actions = st.one_of(
    st.builds(lambda i, j, op: Action(tool="combine", args={"i": i, "j": j, "op": op}),
              st.integers(-1, 4), st.integers(-1, 4), st.sampled_from(["add", "sub", "mul", "div", "pow"])),
    st.sampled_from([Action(tool="reset"), Action(tool="stop"), Action(tool="jump"),
                     Action(tool="combine", args={"i": "0", "j": 1, "op": "add"})]),
)
NONE_HOOKS = ("def filter_action(action, state, memo):\n    return None\n"
              "def modify_transition(action, response, state, memo):\n    return None\n"
              "def filter_observation(observation, state, memo):\n    return None\n")


class Plain(EnvHarness):
    """A component that overrides nothing."""

    kind = "plain"


def without_layers(info: dict) -> dict:
    return {k: v for k, v in info.items() if k != "envh"}


@settings(max_examples=40, deadline=None)
@given(task=st.sampled_from(TASKS), seed=st.integers(0, 5), depth=st.integers(1, 3),
       script=st.lists(actions, max_size=8))
def test_the_empty_stack_is_transparent(task: TaskRef, seed: int, depth: int, script: list[Action]) -> None:
    bare, stack = Toy24Env(), Toy24Env()
    for k in range(depth):
        stack = Plain(stack) if k % 2 == 0 else CodeContract(stack, NONE_HOOKS)
    a, b = bare.reset(task=task, seed=seed), stack.reset(task=task, seed=seed)
    assert a.observation == b.observation and a.info == without_layers(b.info)
    assert len(b.info["envh"]) == depth
    for action in script:
        ra, rb = bare.step(action), stack.step(action)
        assert (ra.observation, ra.reward, ra.terminated, ra.truncated) == \
               (rb.observation, rb.reward, rb.terminated, rb.truncated)
        assert ra.info == without_layers(rb.info)
        assert all(e["action"] == "passed" and not e["transition"] and not e["observation"]
                   for e in rb.info["envh"])
        assert bare.observe() == stack.observe()
    assert bare.evaluate() == stack.evaluate()
    assert bare.get_env_state() == stack.get_env_state()
    assert bare.tools() == stack.tools() and bare.list_tasks("easy") == stack.list_tasks("easy")


def test_observe_after_an_error_step_is_transparent() -> None:
    bare, stack = Toy24Env(), Plain(Toy24Env())
    for env in (bare, stack):
        env.reset(task=TASKS[0])
        env.step(Action(tool="jump"))
    assert bare.observe() == stack.observe()


def test_a_subclass_defining_evaluate_is_rejected_at_class_creation() -> None:
    with pytest.raises(SealedVerifierError, match="defines evaluate\\(\\), but the verifier is sealed"):
        class Cheat(EnvHarness):
            def evaluate(self) -> EvaluationResult:
                return EvaluationResult(success=True, score=1.0)


def test_a_grandchild_defining_evaluate_is_rejected_too() -> None:
    with pytest.raises(SealedVerifierError):
        class Sneaky(Plain):
            def evaluate(self) -> EvaluationResult:
                return EvaluationResult(success=True, score=1.0)


def test_the_composer_key_is_required_to_compose_verdicts() -> None:
    with pytest.raises(SealedVerifierError):
        class FakeChain(EnvHarness, _composes_verdicts=object()):
            def evaluate(self) -> EvaluationResult:
                return EvaluationResult(success=True, score=1.0)


def test_assigning_evaluate_on_class_or_instance_is_rejected() -> None:
    def win(self=None) -> EvaluationResult:
        return EvaluationResult(success=True, score=1.0)

    with pytest.raises(SealedVerifierError):
        Plain.evaluate = win
    with pytest.raises(SealedVerifierError):
        EnvHarness.evaluate = win
    env = Plain(Toy24Env())
    with pytest.raises(SealedVerifierError):
        env.evaluate = win
    env.reset(task=TASKS[0])
    assert env.evaluate().success is False


def test_only_chain_composes_verdicts() -> None:
    from envh.components.chain import Chain
    from envh.components.stage import Stage

    defining = [cls for cls in (Chain, Stage, CodeContract, Plain) if "evaluate" in cls.__dict__]
    assert defining == [Chain]


def test_components_do_not_commute() -> None:
    """A stage over a contract replays through the contract's rules; a contract over a
    stage does not see the replay. Same two layers, different worlds."""
    stage = {"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]}
    no_add = {"kind": "contract", "code": (
        "def filter_action(action, state, memo):\n"
        "    if action.args.get('op') == 'add':\n"
        "        return Block(reason='adding is forbidden')\n")}
    task = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
    contract_outside = envh.make({"bridge": "toy24", "layers": [stage, no_add]})
    assert contract_outside.reset(task=task).observation.data["numbers"] == ["4", "5"]
    stage_outside = envh.make({"bridge": "toy24", "layers": [no_add, stage]})
    with pytest.raises(ReplayError, match="adding is forbidden"):
        stage_outside.reset(task=task)
