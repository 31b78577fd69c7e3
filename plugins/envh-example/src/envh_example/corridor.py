"""Corridor: a five-cell corridor; move left or right until you stand on the goal.

The smallest useful bridge: ``envh.Bridge`` supplies tool-call validation, save/restore
by replay and the context-manager protocol, so a bridge only resets, steps and reports.
"""

from __future__ import annotations

from typing import Any

from envh import Action, Bridge, EnvResponse, EvaluationResult, Observation, ResetResult, TaskRef, ToolSpec
from envh.errors import EnvhError, UnknownNameError

LENGTH = 5
GOAL = LENGTH - 1
TOOLS = [ToolSpec(name="move", description="Step one cell left or right.", parameters={
    "type": "object", "properties": {"direction": {"type": "string", "enum": ["left", "right"],
                                                  "description": "where to step"}},
    "required": ["direction"], "additionalProperties": False})]
STATE_SCHEMA: dict[str, Any] = {
    "type": "object", "description": "A corridor of cells 0..4; the episode ends on the goal cell.",
    "properties": {
        "position": {"type": "integer", "description": "the cell you stand on"},
        "goal": {"type": "integer", "description": "the cell to reach"},
        "steps": {"type": "integer", "description": "moves made this episode"},
        "bumps": {"type": "integer", "description": "moves into a wall this episode"},
    },
}


class CorridorEnv(Bridge):
    """Tasks are start cells: ``default/0`` .. ``default/3``."""

    name = "corridor"

    def __init__(self) -> None:
        self.position, self.steps, self.bumps = 0, 0, 0

    def tools(self) -> list[ToolSpec]:
        return TOOLS

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        if split not in (None, "default"):
            raise UnknownNameError("corridor split", split, ["default"])
        return [TaskRef(suite="corridor", split="default", instance_id=str(i)) for i in range(GOAL)]

    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        start = task.instance_id if task else "0"
        if start not in {str(i) for i in range(GOAL)}:
            raise EnvhError(f"Bad corridor task {start!r}: the start cell must be 0..{GOAL - 1}")
        self.position, self.steps, self.bumps = int(start), 0, 0
        return ResetResult(observation=self.observe(), info={"task": f"corridor/default/{start}"})

    def _step(self, action: Action) -> EnvResponse:
        if self.position == GOAL:
            return self.error_response("You already reached the goal.", kind="episode_over")
        self.steps += 1
        new = self.position + (1 if action.args["direction"] == "right" else -1)
        if not 0 <= new < LENGTH:
            self.bumps += 1
        else:
            self.position = new
        done = self.position == GOAL
        return EnvResponse(observation=self.observe(), terminated=done, reward=1.0 if done else 0.0)

    def observe(self) -> Observation:
        cells = " ".join("A" if i == self.position else "G" if i == GOAL else "." for i in range(LENGTH))
        text = (f"Corridor: [{cells}]. You are at cell {self.position}; the goal is cell {GOAL}."
                + (" You reached the goal." if self.position == GOAL else " Move left or right."))
        return Observation(text=text, data={"position": self.position})

    def evaluate(self) -> EvaluationResult:
        ok = self.position == GOAL
        return EvaluationResult(success=ok, score=1.0 if ok else 0.0, metrics={"steps": self.steps})

    def get_env_state(self) -> dict[str, Any]:
        return {"position": self.position, "goal": GOAL, "steps": self.steps, "bumps": self.bumps}

    def env_state_schema(self) -> dict[str, Any]:
        return STATE_SCHEMA
