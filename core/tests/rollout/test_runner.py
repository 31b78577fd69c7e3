"""The episode runner: what a trajectory records, and how each failure is classified."""

from __future__ import annotations

import envh
import pytest
from envh import TaskRef
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import EpisodeRequest, trajectory_from_json, trajectory_to_json
from envh.rollout.warm import Warm

TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"
BLOCK_DIV = ("def filter_action(action, state, memo):\n"
             "    if action.tool == 'combine' and action.args['op'] == 'add':\n"
             "        return Block(reason='no adding here')\n")
REWRITE = ("def filter_action(action, state, memo):\n"
           "    if action.tool == 'combine':\n"
           "        return Action(tool='combine', args={'i': action.args['j'], 'j': action.args['i'],"
           " 'op': action.args['op']})\n")


def request(registry, spec, policy="solver", **kw):
    data = envh.spec_to_data(envh.parse_spec(spec, registry), registry)
    kw.setdefault("task", TASK)
    return EpisodeRequest(key="k#0", spec=data, spec_id=envh.spec_id(spec, registry), seed=3,
                          policy=policy, run_id="r1", **kw)


def test_a_solved_episode_names_what_shaped_it(registry):
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}
    t = run_episode(request(registry, spec))
    assert t.success and t.stop == "terminated" and t.error_class is None
    assert t.spec_id == envh.spec_id(spec, registry) and t.task == TASK and t.seed == 3
    assert t.policy_id == "test-solver" and t.policy == "solver" and t.run_id == "r1"
    assert t.versions["envh"] == envh.__version__ and "python" in t.versions
    assert [s.index for s in t.steps] == list(range(len(t.steps))) and len(t.steps) == 4
    first = t.steps[0]
    # the policy saw the upper-cased text; the base observation is kept beside it
    assert first.observation.text.startswith("TARGET: 24")
    assert first.base_observation is not None and first.base_observation.text.startswith("Target: 24")
    assert t.initial_base_observation.text.startswith("Target: 24")
    assert first.effects[0]["kind"] == "contract" and first.effects[0]["observation"] is True
    assert first.executed == first.proposed and first.raw.startswith("combine(")
    assert t.usage == {"completion_tokens": 3 * 3 + 1}
    assert t.tools[0]["name"] == "combine" and t.verdict.success
    assert trajectory_from_json(trajectory_to_json(t)) == t


def test_blocked_and_rewritten_actions_are_told_apart(registry):
    blocked = run_episode(request(registry, {"bridge": "toy24", "layers": [
        {"kind": "contract", "code": BLOCK_DIV}, {"kind": "budget", "max_steps": 3}]}))
    step = blocked.steps[0]
    assert step.proposed.args["op"] == "add" and step.executed is None
    assert step.blocked == "no adding here" and step.error["type"] == "blocked"
    assert step.base_observation is None  # nothing reached the base env to observe

    rewritten = run_episode(request(registry, {"bridge": "toy24", "layers": [
        {"kind": "contract", "code": REWRITE}]}))
    step = rewritten.steps[0]
    assert step.executed.args == {"i": step.proposed.args["j"], "j": step.proposed.args["i"],
                                  "op": step.proposed.args["op"]}
    assert step.blocked is None and step.base_observation is None


def test_unparseable_outputs_are_invalid_steps_and_the_episode_goes_on(registry):
    spec = {"bridge": "toy24"}
    played = [run_episode(request(registry, spec, policy=f"fuzz:{seed}", max_steps=60)) for seed in range(10)]
    t = max(played, key=lambda t: t.invalid_steps)
    invalid = [s for s in t.steps if s.proposed is None]
    assert invalid and t.invalid_steps == len(invalid)
    assert all(s.invalid and s.observation.text.startswith("Error: your output") for s in invalid)
    assert all(s.executed is None and s.error["type"] == "invalid_output" for s in invalid)
    assert t.error_class is None and t.verdict is not None
    assert any(s.index > invalid[0].index for s in t.steps)  # it went on after the invalid step


def test_max_steps_ends_the_episode_with_a_verdict(registry):
    t = run_episode(request(registry, {"bridge": "toy24"}, policy="fuzz:1", max_steps=2,
                            task=TaskRef(suite="toy24", split="hard", instance_id="1,5,5,5")))
    assert len(t.steps) <= 2 and t.verdict is not None
    assert t.stop in ("max_steps", "terminated")


def test_policy_errors_are_classified(registry):
    t = run_episode(request(registry, {"bridge": "toy24"}, policy="solver",
                            policy_options={}, task=None))
    assert t.error_class is None
    broken = run_episode(request(registry, {"bridge": "toy24"}, policy="nosuchpolicy"))
    assert broken.error_class == "policy_error" and "nosuchpolicy" in broken.error


def test_contract_code_errors_are_env_errors_carrying_the_message(registry):
    code = "def filter_action(action, state, memo):\n    return 1 // 0\n"
    t = run_episode(request(registry, {"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}))
    assert t.error_class == "env_error" and "ContractCodeError" in t.error and "filter_action" in t.error
    assert t.stop == "error" and t.verdict is None


def test_stage_replay_errors_are_env_errors(registry):
    spec = {"bridge": "toy24", "layers": [{"kind": "stage", "actions": [
        {"tool": "combine", "args": {"i": 0, "j": 9, "op": "add"}}]}]}
    t = run_episode(request(registry, spec))
    assert t.error_class == "env_error" and "ReplayError" in t.error and "#0" in t.error


def test_the_time_limit_interrupts_a_blocked_policy(registry):
    warm = Warm(registry)
    try:  # env and policy built first: the limit then falls in the policy's turn
        assert run_episode(request(registry, {"bridge": "toy24"}, policy="sleepy:0.01"), warm).error_class is None
        t = run_episode(request(registry, {"bridge": "toy24"}, policy="sleepy:5", timeout_s=0.5), warm)
    finally:
        warm.close()
    assert t.error_class == "timeout" and "0.5 s" in t.error
    assert t.duration_s < 3
    # the policy overran, not the env: its verdict is still taken
    assert t.verdict is not None and t.verdict.success is False and t.error_type == "_Deadline"


class Closing(envh.Bridge):
    """Toy bridge counting close() calls and failing on demand."""

    name = "closing"
    closed = 0

    def __init__(self, fail_reset=False):
        self.fail_reset = fail_reset

    def _reset(self, task, seed, options):
        if self.fail_reset:
            raise envh.errors.InfraError("container image missing")
        return envh.ResetResult(observation=envh.Observation(text="hi"))

    def _step(self, action):
        return envh.EnvResponse(observation=envh.Observation(text="done"), terminated=True)

    def tools(self):
        return [envh.ToolSpec(name="stop", description="stop")]

    def observe(self):
        return envh.Observation(text="hi")

    def evaluate(self):
        return envh.EvaluationResult(success=True, score=1.0)

    def get_env_state(self):
        return {}

    def env_state_schema(self):
        return {"type": "object"}

    def list_tasks(self, split=None):
        return []

    def close(self):
        Closing.closed += 1


@pytest.fixture
def closing_registry():
    import rollout_policies

    class Plugin:
        @envh.hookimpl
        def envh_bridges(self):
            return [envh.BridgeInfo(name="closing", factory=Closing)]

    reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies, Plugin()])
    Closing.closed = 0
    return reg


def test_close_is_always_called_and_warm_envs_are_reused(closing_registry):
    reg = closing_registry
    t = run_episode(request(reg, {"bridge": "closing"}, policy="solver", task=None), registry=reg)
    assert t.success and Closing.closed == 1
    failing = run_episode(request(reg, {"bridge": "closing", "config": {"fail_reset": True}}, task=None),
                          registry=reg)
    assert failing.error_class == "infra_error" and "image missing" in failing.error and Closing.closed == 2
    warm = Warm(reg)
    for _ in range(3):
        assert run_episode(request(reg, {"bridge": "closing"}, task=None), warm).success
    assert Closing.closed == 2  # one env, reset in place
    warm.close()
    assert Closing.closed == 3


def test_raw_outputs_holding_frozen_arguments_are_recorded_as_data(registry):
    t = run_episode(request(registry, {"bridge": "toy24"}, policy="random:3", max_steps=6))
    raws = [s.raw for s in t.steps if isinstance(s.raw, dict) and "args" in s.raw]
    assert raws and all(isinstance(r["args"], dict) for r in raws), raws[:2]
    assert trajectory_from_json(trajectory_to_json(t)) == t


@pytest.mark.parametrize("bad", [{"f": print}, {"nan": float("nan")}, {"nested": {"x": object()}}])
def test_options_that_are_not_json_are_refused_before_any_request_exists(registry, bad):
    from envh.rollout.plan import build_plan

    with pytest.raises(envh.errors.EnvhError, match=f"option '{next(iter(bad))}'.*not JSON data"):
        build_plan({"bridge": "toy24"}, policy="solver", tasks=[None], policy_options=bad, registry=registry)
    with pytest.raises(envh.errors.UnknownNameError, match="Unknown policy 'randmo'"):
        build_plan({"bridge": "toy24"}, policy="randmo", tasks=[None], registry=registry)
