"""Specs: ``make`` builds any stack; random stacks round-trip through save/load and never
change the base verdict; ids are stable; bad specs fail with paths and choices."""

from __future__ import annotations

import json

import envh
import pytest
from envh import Action, ActionableEnv, EnvHarness, EvaluationResult, TaskRef
from envh.bridges.toy24 import CURATED, Toy24Env
from envh.components.chain import Chain
from envh.errors import SpecError, StateError, UnknownNameError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TASKS = [TaskRef(suite="toy24", split=s, instance_id=i) for s in ("easy", "medium") for i in CURATED[s][:3]]
combine = st.builds(lambda i, j, op: {"tool": "combine", "args": {"i": i, "j": j, "op": op}},
                    st.integers(0, 3), st.integers(0, 3), st.sampled_from(["add", "sub", "mul", "div"]))
script = st.lists(st.one_of(combine, st.just({"tool": "reset"}), st.just({"tool": "stop"}),
                            st.just({"tool": "nope"})), max_size=10)
CODES = [
    "def filter_action(action, state, memo):\n    if action.args.get('op') == 'div':\n"
    "        return Block(reason='no division')\n",
    "def filter_observation(observation, state, memo):\n    memo['n'] = memo.get('n', 0) + 1\n"
    "    return observation.text + ' #' + str(memo['n'])\n",
    "def modify_transition(action, response, state, memo):\n    if action.tool == 'stop':\n"
    "        return evolve(response, observation=Observation(text='done'))\n",
    "def filter_action(action, state, memo):\n    if action.tool == 'reset':\n"
    "        return Action(tool='combine', args={'i': 0, 'j': 1, 'op': 'mul'})\n",
]
safe_stage_action = st.builds(lambda op: {"tool": "combine", "args": {"i": 0, "j": 1, "op": op}},
                              st.sampled_from(["add", "mul"]))
leg = st.builds(lambda t: {"bridge": "toy24"} if t is None else {"bridge": "toy24", "layers": [
    {"kind": "stage", "actions": [t]}]}, st.none() | safe_stage_action)
layer = st.one_of(
    st.builds(lambda a: {"kind": "stage", "actions": a}, st.lists(safe_stage_action, max_size=1)),
    st.builds(lambda c: {"kind": "contract", "code": c}, st.sampled_from(CODES)),
    st.builds(lambda n, r: {"kind": "budget", "max_steps": n, "max_repeats": r},
              st.integers(1, 12), st.none() | st.integers(2, 4)),
    st.builds(lambda legs, mode, carry: {
        "kind": "chain", "legs": legs, "mode": mode, "carry": carry,
        "leg_tasks": [{"suite": "toy24", "split": "easy", "instance_id": "1,3,8"}] * len(legs)},
        st.lists(leg, min_size=1, max_size=2), st.sampled_from(["sequential", "alternate"]), st.booleans()),
)
stacks = st.builds(lambda layers: {"bridge": "toy24", "layers": layers}, st.lists(layer, max_size=3).filter(
    # every replayed combine uses up a number; the smallest tasks have three
    lambda layers: sum(len(x.get("actions", ())) for x in layers if x["kind"] == "stage") <= 2))


def play(env: ActionableEnv, task: TaskRef, actions: list[dict]) -> list:
    env.reset(task=task, seed=0)
    out = []
    for raw in actions:
        out.append(env.step(Action(tool=raw["tool"], args=raw.get("args", {}))))
        if out[-1].terminated or out[-1].truncated:
            break
    return out


def base_verdict(env: ActionableEnv) -> EvaluationResult:
    """The verdict a bare bridge gives for the trajectory ``env``'s base(s) took."""
    if isinstance(env, Chain):
        verdicts = [base_verdict(leg) if started else EvaluationResult(success=False, metrics={"started": False})
                    for leg, started in zip(env.legs, env.started)]
        return EvaluationResult(success=all(v.success for v in verdicts),
                                score=sum(v.score for v in verdicts) / len(verdicts),
                                metrics={"legs": [{"success": v.success, "score": v.score, "metrics": v.metrics}
                                                  for v in verdicts]})
    if isinstance(env, EnvHarness):
        return base_verdict(env.inner)
    bare = Toy24Env()
    bare.from_state(json.loads(json.dumps(env.save_state())))
    return bare.evaluate()


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


#: Both tiers play every stack: in this process (``trusted``), and with contract code in the
#: jail (the default, ``None``).
TIERS = [pytest.param("trusted", _settings(60), id="trusted"), pytest.param(None, _settings(60), id="jailed")]


def _contract_tiers(env: ActionableEnv) -> set[str]:
    """The tiers of the contract layers around ``env``'s base (chain legs not included)."""
    tiers = set()
    while env is not None:
        if getattr(env, "kind", None) == "contract":
            tiers.add(env.trust)
        env = getattr(env, "inner", None)
    return tiers


def _evaluate_is_the_base_verdict(trust: str | None, spec: dict, task: TaskRef, actions: list[dict]) -> None:
    with envh.make(spec, trust=trust) as env:
        play(env, task, actions)
        assert env.evaluate() == base_verdict(env)


@pytest.mark.parametrize(("trust", "examples"), TIERS)
def test_evaluate_of_any_stack_is_the_base_verdict(trust: str | None, examples: settings) -> None:
    examples(given(spec=stacks, task=st.sampled_from(TASKS), actions=script)(
        lambda spec, task, actions: _evaluate_is_the_base_verdict(trust, spec, task, actions)))()


def _save_and_load_round_trip(trust: str | None, spec: dict, task: TaskRef, actions: list[dict],
                              more: list[dict]) -> None:
    with envh.make(spec, trust=trust) as a, envh.make(spec, trust=trust) as b:
        assert _contract_tiers(a) <= {"trusted" if trust else "untrusted"}  # each tier really is that tier
        done = any(r.terminated or r.truncated for r in play(a, task, actions))
        saved = json.loads(json.dumps(a.save_state()))
        assert b.from_state(saved) == a.observe()
        assert (b.get_env_state(), b.evaluate(), b.tools()) == (a.get_env_state(), a.evaluate(), a.tools())
        for raw in [] if done else more:
            action = Action(tool=raw["tool"], args=raw.get("args", {}))
            ra, rb = a.step(action), b.step(action)
            assert (ra.observation, ra.reward, ra.terminated, ra.truncated) == \
                   (rb.observation, rb.reward, rb.terminated, rb.truncated)
            if ra.terminated or ra.truncated:
                break
        assert b.evaluate() == a.evaluate()


@pytest.mark.parametrize(("trust", "examples"), TIERS)
def test_save_and_load_round_trip_under_any_stack(trust: str | None, examples: settings) -> None:
    examples(given(spec=stacks, task=st.sampled_from(TASKS), actions=script, more=script)(
        lambda spec, task, actions, more: _save_and_load_round_trip(trust, spec, task, actions, more)))()


def test_restoring_into_a_different_stack_is_a_state_error() -> None:
    with envh.make({"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 3}]}) as a:
        a.reset(task=TASKS[0])
        saved = a.save_state()
    with envh.make({"bridge": "toy24", "layers": [{"kind": "stage"}]}) as b, \
            pytest.raises(StateError, match="does not match layer '0:stage' of kind 'stage'"):
        b.from_state(saved)


# -- specs as data -----------------------------------------------------------------------
def test_unknown_bridge_and_kind_list_the_valid_names() -> None:
    core = envh.make_plugin_manager(entry_points=False)
    with pytest.raises(UnknownNameError, match=r"Unknown bridge 'toy42'. Choose one of: toy24$"):
        envh.make({"bridge": "toy42"}, registry=core)
    with pytest.raises(SpecError, match=r"Unknown component kind 'stag'. Choose one of: "
                                        r"budget, chain, contract, stage @ \$\.layers\[0\]"):
        envh.parse_spec({"bridge": "toy24", "layers": [{"kind": "stag"}]}, core)


@pytest.mark.parametrize(("data", "path"), [
    ({"bridge": "toy24", "layerz": []}, "$.layerz"),
    ({"bridge": "toy24", "layers": [{"kind": "stage"}, {"kind": "contract", "cod": "x"}]}, "$.layers[1].cod"),
    ({"bridge": "toy24", "layers": [{"kind": "chain", "legs": [{"bridge": "toy24", "layers": [
        {"kind": "budget", "max_step": 3}]}]}]}, "$.layers[0].legs[0].layers[0].max_step"),
    ({"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": "many"}]}, "$.layers[0].max_steps"),
    ({"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 0}]}, "$.layers[0]"),
    ({"bridge": "toy24", "layers": [{"kind": "stage", "actions": [{"args": {}}]}]}, "$.layers[0].actions[0]"),
    ({"bridge": "toy24", "layers": ["stage"]}, "$.layers[0]"),
    ({"layers": []}, "$.bridge"),
])
def test_bad_specs_name_the_path(data: dict, path: str) -> None:
    with pytest.raises(SpecError) as info:
        envh.parse_spec(data)
    assert f"@ {path}" in str(info.value), str(info.value)


def test_yaml_and_json_files(tmp_path) -> None:
    data = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 4}]}
    (tmp_path / "s.json").write_text(json.dumps(data))
    (tmp_path / "s.yaml").write_text("bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 4\n")
    assert envh.parse_spec(tmp_path / "s.json") == envh.parse_spec(str(tmp_path / "s.yaml")) == envh.parse_spec(data)
    (tmp_path / "bad.yaml").write_text("bridge: [toy24\n")
    with pytest.raises(SpecError, match="not valid YAML/JSON"):
        envh.parse_spec(tmp_path / "bad.yaml")
    with pytest.raises(SpecError, match="does not exist"):
        envh.parse_spec(str(tmp_path / "missing.yaml"))
    (tmp_path / "list.yaml").write_text("- bridge: toy24\n")
    with pytest.raises(SpecError, match="must be a mapping"):
        envh.parse_spec(tmp_path / "list.yaml")


def test_spec_id_is_stable_under_key_order_and_defaults() -> None:
    a = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 5},
                                       {"kind": "stage", "actions": [{"tool": "reset"}]}]}
    b = {"layers": [{"max_steps": 5, "max_repeats": None, "kind": "budget", "id": None},
                    {"actions": [{"args": {}, "tool": "reset"}], "kind": "stage"}], "config": {}, "bridge": "toy24"}
    assert envh.spec_id(a) == envh.spec_id(b) == envh.spec_id(envh.parse_spec(a))
    assert len(envh.spec_id(a)) == 64
    changed = {**a, "layers": [{"kind": "budget", "max_steps": 6}, a["layers"][1]]}
    assert envh.spec_id(changed) != envh.spec_id(a)
    swapped = {**a, "layers": a["layers"][::-1]}
    assert envh.spec_id(swapped) != envh.spec_id(a)


def test_non_json_state_is_a_state_error() -> None:
    class Leaky(Toy24Env):
        def get_env_state(self) -> dict:
            return {**super().get_env_state(), "engine": object()}

    code = "def filter_action(action, state, memo):\n    return None if state['target'] else action\n"
    env = envh.components.contract.CodeContract(Leaky(), code)
    env.reset(task=TASKS[0])
    with pytest.raises(StateError, match=r"env state at \$\.engine is a object, not plain JSON data"):
        env.step(Action(tool="reset"))


def test_bad_bridge_config_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="Bad config for bridge 'toy24'"):
        envh.make({"bridge": "toy24", "config": {"levels": 3}})


def test_a_bare_bridge_name_is_a_spec_and_a_missing_file_is_not() -> None:
    assert envh.parse_spec("toy24") == envh.parse_spec({"bridge": "toy24"})
    with pytest.raises(SpecError, match="Spec file 'worlds/missing.yaml' does not exist"):
        envh.parse_spec("worlds/missing.yaml")
    with pytest.raises(UnknownNameError, match="Unknown bridge 'toy42'"):
        envh.make("toy42")
