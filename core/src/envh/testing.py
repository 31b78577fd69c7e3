"""``envh.testing``: the contract suite any bridge or component kind must pass.

It is a pytest plugin (entry point ``pytest11``) and a library. Subclass
``BridgeContract`` or ``ComponentContract`` in your own test module and provide the
fixtures they name; every test below then runs against your code::

    class TestMyBridge(BridgeContract):
        @pytest.fixture
        def env_factory(self):
            return lambda: MyBridge(level=1)

        @pytest.fixture
        def task(self):
            return TaskRef(suite="mine", split="test", instance_id="a")

        @pytest.fixture
        def sample_actions(self):
            return [Action(tool="move", args={"to": "door"})]
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .env import ActionableEnv
from .harness import EnvHarness
from .testing_llm import llm_replay_server  # noqa: F401  (a pytest fixture offered to third parties)
from .types import Action, EnvResponse, EvaluationResult, Observation, ResetResult, TaskRef, ToolSpec

HUGE = "x" * 1_000_000


def play(env: ActionableEnv, task: TaskRef | None, seed: int, actions: list[Action]) -> list[EnvResponse]:
    """Reset and step ``actions`` until the episode ends; the responses."""
    env.reset(task=task, seed=seed)
    out = []
    for action in actions:
        resp = env.step(action)
        out.append(resp)
        if resp.terminated or resp.truncated:
            break
    return out


def _is_json(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def bad_actions(tools: list[ToolSpec]) -> list[Any]:
    """Malformed calls every env must answer with an error observation."""
    out: list[Any] = [Action(tool="definitely_not_a_tool", args={}), Action(tool=HUGE, args={})]
    for tool in tools:
        props = (tool.parameters or {}).get("properties", {})
        if props:
            out.append(Action(tool=tool.name, args={k: HUGE for k in props}))
            out.append(Action(tool=tool.name, args={k: [[{"deep": None}]] for k in props}))
            break
    return out


class BridgeContract:
    """The contract suite for bridges. Fixtures to provide: ``env_factory`` (a callable
    returning a fresh env), ``task`` (a ``TaskRef`` or None), ``sample_actions`` (a short
    valid play of that task)."""

    seed = 0

    @pytest.fixture
    def env(self, env_factory: Callable[[], ActionableEnv]) -> Any:
        env = env_factory()
        yield env
        env.close()

    def test_tools_are_valid(self, env: ActionableEnv, task: TaskRef | None) -> None:
        env.reset(task=task, seed=self.seed)
        tools = env.tools()
        assert tools and all(isinstance(t, ToolSpec) for t in tools)
        assert len({t.name for t in tools}) == len(tools)
        for t in tools:
            assert _is_json(t.parameters)
            assert t.parameters.get("type", "object") == "object"
            jsonschema = pytest.importorskip("jsonschema")
            jsonschema.Draft202012Validator.check_schema(t.parameters)

    def test_reset_is_deterministic(self, env_factory: Callable[[], ActionableEnv],
                                    task: TaskRef | None, sample_actions: list[Action]) -> None:
        a, b = env_factory(), env_factory()
        try:
            ra, rb = a.reset(task=task, seed=self.seed), b.reset(task=task, seed=self.seed)
            assert isinstance(ra, ResetResult) and ra.observation == rb.observation
            assert a.get_env_state() == b.get_env_state()
            for action in sample_actions:
                sa, sb = a.step(action), b.step(action)
                assert (sa.observation, sa.reward, sa.terminated, sa.truncated) == \
                       (sb.observation, sb.reward, sb.terminated, sb.truncated)
                if sa.terminated or sa.truncated:
                    break
            assert a.evaluate() == b.evaluate()
        finally:
            a.close()
            b.close()

    def test_step_observe_evaluate_agree(self, env: ActionableEnv, task: TaskRef | None,
                                         sample_actions: list[Action]) -> None:
        first = env.reset(task=task, seed=self.seed)
        assert env.observe() == first.observation
        for resp in play(env, task, self.seed, sample_actions):
            assert isinstance(resp, EnvResponse) and isinstance(resp.observation, Observation)
            assert isinstance(resp.reward, (int, float))
        assert env.observe() == resp.observation
        verdict = env.evaluate()
        assert isinstance(verdict, EvaluationResult) and isinstance(verdict.success, bool)
        assert _is_json(verdict.metrics)

    #: steps of the random gym loop below; every episode must end within them
    gym_max_steps = 12

    def test_random_gym_loop_ends(self, env_factory: Callable[[], ActionableEnv], task: TaskRef | None) -> None:
        """``while not done: step(action_space.sample())`` ends under gymnasium's
        TimeLimit, and every sampled call is answered (an error observation at worst)."""
        gymnasium = pytest.importorskip("gymnasium")
        from .gym import EnvhGymEnv

        env = gymnasium.wrappers.TimeLimit(EnvhGymEnv(env_factory(), task=task), max_episode_steps=self.gym_max_steps)
        try:
            for seed in (self.seed, self.seed + 1):
                env.reset(seed=seed)
                env.action_space.seed(seed)
                done, steps = False, 0
                while not done:
                    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                    assert isinstance(obs, str) and isinstance(reward, float)
                    done, steps = terminated or truncated, steps + 1
                assert steps <= self.gym_max_steps
        finally:
            env.close()

    def test_unknown_split_and_task_are_refused(self, env: ActionableEnv, task: TaskRef | None) -> None:
        """One rule everywhere: an unknown split, or an instance id the bridge does not
        list (unless it accepts any id by construction), is a typed error naming the choices."""
        from .errors import UnknownNameError

        suite = task.suite if task is not None else getattr(env.unwrapped, "name", "default")
        with pytest.raises(UnknownNameError, match="split"):
            env.reset(task=TaskRef(suite=suite, split="no-such-split", instance_id="x"), seed=self.seed)
        if task is not None and not getattr(env.unwrapped, "open_instances", False):
            with pytest.raises(UnknownNameError, match="no-such-instance"):
                env.reset(task=TaskRef(suite=suite, split=task.split, instance_id="no-such-instance"),
                          seed=self.seed)
        env.reset(task=task, seed=self.seed)  # and the env still works

    def test_state_is_json_and_matches_schema(self, env: ActionableEnv, task: TaskRef | None,
                                              sample_actions: list[Action]) -> None:
        play(env, task, self.seed, sample_actions[:1])
        state, schema = env.get_env_state(), env.env_state_schema()
        assert _is_json(state), "get_env_state() must return plain JSON data"
        assert schema.get("description") or any(
            p.get("description") for p in schema.get("properties", {}).values()), \
            "env_state_schema() needs descriptions: designers read them"
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(state, schema)

    def test_save_and_restore_round_trip(self, env_factory: Callable[[], ActionableEnv],
                                         env: ActionableEnv, task: TaskRef | None,
                                         sample_actions: list[Action]) -> None:
        play(env, task, self.seed, sample_actions[: max(1, len(sample_actions) // 2)])
        saved = env.save_state()
        assert _is_json(saved)
        other = env_factory()
        try:
            obs = other.from_state(json.loads(json.dumps(saved)))
            assert obs == env.observe()
            assert other.get_env_state() == env.get_env_state()
            assert other.evaluate() == env.evaluate()
        finally:
            other.close()

    def test_bad_actions_are_error_observations(self, env: ActionableEnv, task: TaskRef | None) -> None:
        env.reset(task=task, seed=self.seed)
        for bad in [*bad_actions(env.tools()), "not an action", None]:
            resp = env.step(bad)  # type: ignore[arg-type]
            assert isinstance(resp, EnvResponse)
            assert resp.info.get("error"), f"no info['error'] for {str(bad)[:80]}"
            assert len(resp.observation.text) < 10_000

    def test_list_tasks(self, env: ActionableEnv) -> None:
        tasks = env.list_tasks()
        assert isinstance(tasks, list) and all(isinstance(t, TaskRef) for t in tasks)

    def test_sealed_verifier_under_components(self, env_factory: Callable[[], ActionableEnv],
                                              task: TaskRef | None, sample_actions: list[Action]) -> None:
        from .components.budget import Budget
        from .components.contract import CodeContract

        code = "def filter_observation(observation, state, memo):\n    return observation.text[:2000]\n"
        stack = Budget(CodeContract(env_factory(), code), max_steps=10_000)
        bare = env_factory()
        try:
            play(stack, task, self.seed, sample_actions)
            play(bare, task, self.seed, sample_actions)
            assert stack.evaluate() == bare.evaluate() == stack.unwrapped.evaluate()
        finally:
            stack.close()
            bare.close()

    def test_close_is_idempotent(self, env_factory: Callable[[], ActionableEnv], task: TaskRef | None) -> None:
        env = env_factory()
        env.reset(task=task, seed=self.seed)
        env.close()
        env.close()


class ComponentContract:
    """The contract suite for component kinds. Fixtures to provide: ``layer`` (a layer
    spec dict), and optionally ``base_spec`` (default: Toy24), ``task``,
    ``sample_actions`` (actions valid on the base env)."""

    seed = 0
    composes_verdicts = False  # True only for chain-like kinds: verdict = all legs' verdicts

    @pytest.fixture
    def base_spec(self) -> dict[str, Any]:
        return {"bridge": "toy24"}

    @pytest.fixture
    def task(self) -> TaskRef | None:
        return TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")

    @pytest.fixture
    def sample_actions(self) -> list[Action]:
        return [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                Action(tool="combine", args={"i": 0, "j": 2, "op": "mul"}),
                Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}), Action(tool="stop")]

    @pytest.fixture
    def failing_actions(self) -> list[Action]:
        """A play of ``task`` that the base verifier fails (1+2+6+6 = 15, then stop)."""
        return [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}), Action(tool="stop")]

    @pytest.fixture
    def stack_spec(self, base_spec: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
        return {**base_spec, "layers": [*base_spec.get("layers", []), layer]}

    def _make(self, spec: dict[str, Any]) -> ActionableEnv:
        from .spec import make

        return make(spec)

    def test_builds_a_harness(self, stack_spec: dict[str, Any]) -> None:
        with self._make(stack_spec) as env:
            assert isinstance(env, EnvHarness)

    def test_verdict_is_the_base_verdict(self, stack_spec: dict[str, Any], base_spec: dict[str, Any],
                                         task: TaskRef | None, sample_actions: list[Action]) -> None:
        stack = self._make(stack_spec)
        try:
            play(stack, task, self.seed, sample_actions)
            reached = stack.unwrapped.save_state()
            with self._make({k: v for k, v in base_spec.items() if k != "layers"}) as bare:
                bare.from_state(reached)
                assert stack.unwrapped.evaluate() == bare.evaluate()
                if self.composes_verdicts:
                    # a composite verdict is never more lenient than its base leg's verdict
                    assert stack.evaluate().success <= bare.evaluate().success
                else:
                    assert stack.evaluate() == bare.evaluate()
        finally:
            stack.close()

    def test_a_failing_play_stays_failed(self, stack_spec: dict[str, Any], base_spec: dict[str, Any],
                                         task: TaskRef | None, failing_actions: list[Action]) -> None:
        """A component cannot force success: the play the base verifier fails, played
        through the stack, is judged by the base bridges alone — and the stack's own
        verdict and every step's reward agree with them."""
        from .harness import audit_stack, base_envs

        with self._make({k: v for k, v in base_spec.items() if k != "layers"}) as bare:
            play(bare, task, self.seed, failing_actions)
            assert not bare.evaluate().success, "failing_actions must fail on the bare env"
        stack = self._make(stack_spec)
        try:
            bases = base_envs(stack)
            rewards: list[float] = []
            base = bases[0]
            step = base.step

            def tapped(action: Action) -> EnvResponse:
                resp = step(action)
                rewards.append(resp.reward)
                return resp

            base.step = tapped  # type: ignore[method-assign]
            try:
                responses = play(stack, task, self.seed, failing_actions)
            finally:
                del base.step
            assert audit_stack(stack) == [], "a layer can change the reward or verdict behind the hooks"
            verdicts = [type(b).evaluate(b) for b in bases]
            assert stack.evaluate().success is all(v.success for v in verdicts)
            if not self.composes_verdicts:
                assert stack.evaluate() == verdicts[0]
            assert not stack.evaluate().success, "the stack turned a failing play into a success"
            outer = [r.reward for r in responses if not (r.info.get("error") or {}).get("type") == "blocked"]
            assert outer == rewards[-len(outer):] if outer else True, "a layer changed a step's reward"
        finally:
            stack.close()

    def test_layer_effects_are_recorded(self, stack_spec: dict[str, Any], task: TaskRef | None,
                                        sample_actions: list[Action]) -> None:
        with self._make(stack_spec) as env:
            for resp in play(env, task, self.seed, sample_actions):
                assert resp.info.get("envh"), "each step must record layer effects in info['envh']"

    def test_deterministic_and_round_trips(self, stack_spec: dict[str, Any], task: TaskRef | None,
                                           sample_actions: list[Action]) -> None:
        a, b = self._make(stack_spec), self._make(stack_spec)
        try:
            ra, rb = play(a, task, self.seed, sample_actions), play(b, task, self.seed, sample_actions)
            assert [r.observation for r in ra] == [r.observation for r in rb]
            saved = json.loads(json.dumps(a.save_state()))
            with self._make(stack_spec) as c:
                assert c.from_state(saved) == a.observe()
                assert c.evaluate() == a.evaluate()
        finally:
            a.close()
            b.close()

    def test_bad_actions_are_error_observations(self, stack_spec: dict[str, Any], task: TaskRef | None) -> None:
        with self._make(stack_spec) as env:
            env.reset(task=task, seed=self.seed)
            for bad in [*bad_actions(env.tools()), "not an action"]:
                resp = env.step(bad)  # type: ignore[arg-type]
                assert resp.info.get("error") or resp.truncated or resp.terminated
