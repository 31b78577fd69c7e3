"""Fixtures of the policy tests: an episode loop, Toy24, a small text env, the replay server."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from envh import Action, EnvResponse, Observation, ResetResult, TaskRef, ToolSpec
from envh.bridge import Bridge
from envh.bridges.toy24 import Toy24Env
from envh.testing_llm import llm_replay_server  # noqa: F401 - the fixture under test


@attrs.frozen(kw_only=True)
class Episode:
    """What a policy did in one episode: its steps, the env's answers, the verdict."""

    steps: list[Any]
    observations: list[Observation]
    success: bool


def play(env: Any, policy: Any, task: TaskRef | None = None, max_steps: int = 10) -> Episode:
    """The protocol's episode loop: start, then act/step until the episode ends."""
    obs = env.reset(task=task, seed=0).observation
    tools = env.tools()
    policy.start(task=task, tools=tools, observation=obs)
    steps, seen = [], [obs]
    for _ in range(max_steps):
        step = policy.act(obs, tools)
        steps.append(step)
        if step.action is None:
            obs = Observation(text=f"Error: your output is not a valid action ({step.invalid}).")
            seen.append(obs)
            continue
        resp = env.step(step.action)
        obs = resp.observation
        seen.append(obs)
        if resp.terminated or resp.truncated:
            break
    return Episode(steps=steps, observations=seen, success=env.evaluate().success)


class Rooms(Bridge):
    """A text env with one command tool and admissible commands: reach the kitchen."""

    name = "rooms"
    TOOL = ToolSpec(name="act", description="a command, e.g. 'go to kitchen'",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}},
                                "required": ["command"], "additionalProperties": False})
    ROOMS = ("hall", "kitchen", "garden")

    def tools(self) -> list[ToolSpec]:
        return [self.TOOL]

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        return [TaskRef(suite="rooms", instance_id="kitchen")]

    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        self.room, self.done = "hall", False
        return ResetResult(observation=self.observe())

    def _step(self, action: Action) -> EnvResponse:
        command = action.args["command"]
        if command not in self.admissible():
            return self.error_response(f"{command!r} is not admissible here.", kind="inadmissible")
        if command == "stop":
            self.done = True
            return EnvResponse(observation=self.observe(), terminated=True)
        self.room = command.removeprefix("go to ")
        return EnvResponse(observation=self.observe())

    def admissible(self) -> list[str]:
        return [f"go to {r}" for r in self.ROOMS if r != self.room] + ["look", "stop"]

    def observe(self) -> Observation:
        return Observation(text=f"You are in the {self.room}. Go to the kitchen, then stop.",
                           data={"admissible_commands": self.admissible(), "room": self.room})

    def evaluate(self) -> Any:
        from envh import EvaluationResult

        ok = self.done and self.room == "kitchen"
        return EvaluationResult(success=ok, score=float(ok))

    def get_env_state(self) -> dict[str, Any]:
        return {"room": self.room, "done": self.done}

    def env_state_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"room": {"type": "string"}, "done": {"type": "boolean"}}}


@pytest.fixture(name="play")
def play_fixture() -> Any:
    """The episode loop, ``play(env, policy, task=None, max_steps=10) -> Episode``."""
    return play


@pytest.fixture
def toy24() -> Any:
    with Toy24Env() as env:
        yield env


@pytest.fixture
def rooms() -> Any:
    with Rooms() as env:
        yield env

