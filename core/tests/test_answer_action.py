"""``EnvHarness.answer_action``: a layer answers an action itself (a workspace's
meta-actions). The inner env is not stepped, the step earns 0 and ends nothing whatever the
layer wants, layers outside see an ordinary step, and the stack audit has nothing to report:
a third party gets this without overriding ``step()``."""

from __future__ import annotations

import json
from typing import Any

import envh
import pytest
from envh import Action, Answer, EnvHarness, EnvResponse, Observation, TaskRef
from envh.bridges.toy24 import CURATED, Toy24Env
from envh.components.budget import Budget
from envh.errors import EnvhError
from envh.harness import audit_stack

TASK = TaskRef(suite="toy24", split="easy", instance_id=CURATED["easy"][0])
COMBINE = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})


class Oracle(EnvHarness):
    """Answers ``ask``; every other action goes on. ``seen`` counts the transitions it saw."""

    kind = "oracle"

    def __init__(self, inner: Any, answer: Any = None) -> None:
        super().__init__(inner)
        self.answer, self.seen = answer, 0

    def answer_action(self, action: Action, state: Any) -> Any:
        if action.tool != "ask":
            return None
        if self.answer is not None:
            return self.answer
        if not action.args.get("q"):
            return Answer(observation=Observation(text="Error: ask needs q"),
                          info={"error": {"type": "invalid_arguments", "message": "q missing"}})
        return Answer(observation=Observation(text=f"answer to {action.args['q']}"), info={"oracle": {"n": 1}},
                      effect={"asked": action.args["q"]})

    def modify_transition(self, action: Action, response: EnvResponse, state: Any) -> EnvResponse:
        self.seen += 1
        return response


def test_an_answered_action_never_reaches_the_bridge_and_earns_nothing() -> None:
    base = Toy24Env()
    env = Oracle(base)
    first = env.reset(task=TASK, seed=0).observation
    before = json.dumps(base.save_state(), sort_keys=True)
    resp = env.step(Action(tool="ask", args={"q": "which pair?"}))
    assert resp.observation.text == "answer to which pair?"
    assert (resp.reward, resp.terminated, resp.truncated) == (0.0, False, False)
    assert json.dumps(base.save_state(), sort_keys=True) == before  # not stepped
    assert env.seen == 0  # nor were this layer's other hooks
    # the layer's effect: its extra keys beside core's own
    (effect,) = resp.info["envh"]
    assert effect == {"asked": "which pair?", "layer": "oracle", "kind": "oracle", "action": "answered",
                      "transition": True, "observation": True}
    assert resp.info["oracle"] == {"n": 1}
    assert env.observe() == first  # the world's view is unchanged
    ok = env.step(COMBINE)  # every other action goes on, through the other hooks
    assert "error" not in ok.info and env.seen == 1 and ok.info["envh"][-1]["action"] == "passed"
    assert env.evaluate() == base.evaluate()


def test_an_answer_to_a_bad_call_is_an_error_step() -> None:
    env = Oracle(Toy24Env())
    env.reset(task=TASK, seed=0)
    resp = env.step(Action(tool="ask", args={}))
    assert resp.info["error"]["type"] == "invalid_arguments" and resp.reward == 0.0


def test_a_budget_outside_charges_answered_actions() -> None:
    env = Budget(Oracle(Toy24Env()), max_steps=2)
    env.reset(task=TASK, seed=0)
    assert not env.step(Action(tool="ask", args={"q": "a"})).truncated
    assert env.step(Action(tool="ask", args={"q": "b"})).truncated


@pytest.mark.parametrize(("answer", "words"), [
    (Observation(text="not an Answer"), "expected Answer or None"),
    ("text", "expected Answer or None"),
    (EnvResponse(observation=Observation(text="x"), reward=1.0), "expected Answer or None"),
    (Answer(observation="x"), "expected Observation"),  # type: ignore[arg-type]
    (Answer(observation=Observation(text="x"), info={"envh": []}), "info['envh']"),
    (Answer(observation=Observation(text="x"), effect={"action": "passed"}), "sets action"),
    (Answer(observation=Observation(text="x"), effect={"observation_before": {"text": "forged"}}),
     "sets observation_before"),
    (Answer(observation=Observation(text="x"), effect={"reason": "r", "sent": {}}), "sets reason, sent"),
    (Answer(observation=Observation(text="x"), info={"error": "boom"}), "info['error'] must be a mapping"),
    (Answer(observation=Observation(text="x"), info={"error": {"type": 1, "message": "m"}}), "info['error']"),
    (Answer(observation=Observation(text="x"), info={"n": object()}), "not JSON data"),
    (Answer(observation=Observation(text="x"), effect={"n": {1: 2}}), "not JSON data"),
])
def test_an_answer_that_is_not_one_is_refused(answer: Any, words: str) -> None:
    env = Oracle(Toy24Env(), answer=answer)
    env.reset(task=TASK, seed=0)
    with pytest.raises(EnvhError, match=words.replace("[", r"\[").replace("]", r"\]")):
        env.step(Action(tool="ask", args={"q": "x"}))


def test_a_layer_that_answers_needs_no_step_override_and_the_audit_is_clean() -> None:
    assert "step" not in vars(Oracle)
    assert audit_stack(Oracle(Toy24Env())) == []



class Sub(Answer):  # type: ignore[misc]
    """Not core's record."""


def test_a_subclass_of_answer_is_refused() -> None:
    env = Oracle(Toy24Env(), answer=Sub(observation=Observation(text="x")))
    env.reset(task=TASK, seed=0)
    with pytest.raises(EnvhError, match="expected Answer or None"):
        env.step(Action(tool="ask", args={"q": "x"}))


class OnlyAnswers(EnvHarness):
    """Overrides answer_action and nothing else."""

    kind = "only-answers"

    def answer_action(self, action: Action, state: Any) -> Any:
        self.offered = [*getattr(self, "offered", []), action]
        return Answer(observation=Observation(text="here")) if action.tool == "ask" else None


class NotQuiteAnAction(Action):  # type: ignore[misc]
    pass


def test_a_layer_that_only_answers_answers_and_is_offered_only_actions() -> None:
    base = Toy24Env()
    env = OnlyAnswers(base)
    env.reset(task=TASK, seed=0)
    assert env.step(Action(tool="ask", args={})).observation.text == "here"
    assert base.steps == 0
    odd = NotQuiteAnAction(tool="ask", args={})
    resp = env.step(odd)  # not core's Action: it goes on, unoffered, and the bridge refuses it
    assert env.offered == [Action(tool="ask", args={})] and resp.info["envh"][-1]["action"] == "passed"


def test_observe_is_unchanged_by_an_answer_in_every_layer_outside() -> None:
    stage = {"kind": "stage", "actions": []}
    for outer in ("budget", "stage", "contract"):
        layers = {"budget": [{"kind": "budget", "max_steps": 9}], "stage": [stage],
                  "contract": [{"kind": "contract", "code": "def filter_observation(observation, state, memo):\n"
                                                            "    return observation.text + '!'\n"}]}[outer]
        registry = envh.get_registry()
        with envh.make({"bridge": "toy24", "layers": layers}, trust="trusted", registry=registry) as inner:
            env = inner
            # the answering layer sits under the spec's layers: rebuild the stack around it
            innermost = env
            while isinstance(getattr(innermost, "inner", None), EnvHarness):
                innermost = innermost.inner
            innermost.inner = Oracle(innermost.inner)
            env.reset(task=TASK, seed=0)
            before = env.observe()
            resp = env.step(Action(tool="ask", args={"q": "which?"}))
            assert "answer to which?" in resp.observation.text
            assert env.observe() == before, outer
            # nor is the answer saved as the stack's view (a budget's repeat count may see it:
            # the same answer again is a repeat)
            assert "answer to" not in str(env.save_state().get("last_observation")), outer


def test_a_trajectory_records_an_answered_action_as_never_reaching_the_bridge() -> None:
    from envh.rollout.runner import reached_base

    env = Budget(Oracle(Toy24Env()), max_steps=5)
    env.reset(task=TASK, seed=0)
    ask = Action(tool="ask", args={"q": "x"})
    executed, why = reached_base(ask, list(env.step(ask).info["envh"]))
    assert executed is None and why == "answered by layer 'oracle'"
    assert reached_base(COMBINE, list(env.step(COMBINE).info["envh"])) == (COMBINE, None)
