"""Toy24: the 24 arithmetic game, the reference bridge (pure Python, microseconds a step).

Tools: ``combine(i, j, op)`` removes numbers i and j and appends ``n[i] op n[j]``;
``reset()`` restores the puzzle's numbers; ``stop()`` ends the episode. The verifier:
success iff, when stopped, one of the numbers equals the target.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .. import errors
from ..bridge import Bridge
from ..types import Action, EnvResponse, EvaluationResult, Observation, ResetResult, TaskRef, ToolSpec
from . import toy24_solver as solver

CURATED: dict[str, list[str]] = {
    "easy": ["2,3,4", "1,3,8", "4,4,5", "2,2,6", "3,3,7", "2,10,12", "1,5,5", "3,9,12", "8,8,8", "6,6,12"],
    "medium": ["1,2,6,6", "1,6,8,10", "2,3,6,13", "2,6,10,10", "3,3,5,10", "3,6,8,12", "4,4,6,7",
               "4,11,13,13", "6,11,12,12", "9,11,11,13"],
    "hard": ["1,5,5,5", "3,3,8,8", "1,3,4,6", "4,4,7,7", "1,2,7,13", "2,5,5,10", "5,9,11,12",
             "7,9,12,13", "1,1,5,12", "2,4,7,7"],
}
SPLITS = (*CURATED, "generated")
TOOLS = [
    ToolSpec(name="combine", description=(
        "Combine numbers at positions i and j (0-based) with op; both are removed and the "
        "result n[i] op n[j] is appended at the end."),
        parameters={"type": "object", "properties": {
            "i": {"type": "integer", "description": "position of the left operand"},
            "j": {"type": "integer", "description": "position of the right operand"},
            "op": {"type": "string", "enum": list(solver.OPS), "description": "the operation"}},
            "required": ["i", "j", "op"], "additionalProperties": False}),
    ToolSpec(name="reset", description="Start over from the puzzle's original numbers."),
    ToolSpec(name="stop", description="Finish: you win if one of the numbers equals the target."),
]
STATE_SCHEMA: dict[str, Any] = {
    "type": "object", "description": "The 24 game: combine numbers pairwise to reach the target.",
    "properties": {
        "puzzle": {"type": "array", "items": {"type": "integer"}, "description": "the original numbers"},
        "numbers": {"type": "array", "items": {"type": "string"},
                    "description": "current numbers in order (fractions as 'a/b'); positions are 0-based"},
        "target": {"type": "integer", "description": "the number to reach"},
        "history": {"type": "array", "description": "combine steps so far: i, j, op, result",
                    "items": {"type": "object"}},
        "steps": {"type": "integer", "description": "actions taken this episode"},
        "reached_target": {"type": "boolean", "description": "one current number equals the target"},
        "stopped": {"type": "boolean", "description": "the player called stop()"},
    },
}


@functools.lru_cache(maxsize=16)
def _tools_for(size: int) -> list[ToolSpec]:
    combine, *rest = TOOLS
    props = dict(combine.parameters["properties"])
    for key in ("i", "j"):
        props[key] = {**props[key], "minimum": 0, "maximum": max(size - 1, 0)}
    return [ToolSpec(name=combine.name, description=combine.description,
                     parameters={**combine.parameters, "properties": props}), *rest]


def fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def parse_instance(instance_id: str) -> tuple[list[int], int]:
    """``"4,7,8,8"`` or ``"4,7,8,8->24"`` → (numbers, target)."""
    body, _, target = instance_id.partition("->")
    try:
        numbers = [int(x) for x in body.split(",") if x.strip()]
        return numbers, int(target) if target else 24
    except ValueError as exc:
        raise errors.EnvhError(f"Bad Toy24 instance id {instance_id!r}: expected e.g. '4,7,8,8'") from exc


def generate(n: int, seed: int = 0, size: int = 4, max_number: int = 13) -> list[str]:
    """``n`` distinct solvable puzzles, the same for the same seed. Asking for more than
    exist is an error (the search would never end), found once every puzzle was drawn.
    Computed once per process for each set of arguments (the default 100 take ~0.3 s of
    solving, and every new env's first reset lists its tasks)."""
    return list(_generate(n, seed, size, max_number))


@functools.lru_cache(maxsize=32, typed=True)  # 13 and 13.0 are not one key: the second fails
def _generate(n: int, seed: int, size: int, max_number: int) -> tuple[str, ...]:
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    possible = math.comb(max_number + size - 1, size)  # multisets of ``size`` numbers in 1..max_number
    while len(out) < n:
        nums = sorted(rng.randint(1, max_number) for _ in range(size))
        key = ",".join(map(str, nums))
        if key in seen:
            if len(seen) >= possible:
                raise errors.EnvhError(f"Toy24 has only {len(out)} solvable puzzles of {size} numbers up to "
                                       f"{max_number}; n_generated={n} asks for more")
            continue
        seen.add(key)
        if solver.solvable(nums):
            out.append(key)
    return tuple(out)


class Toy24Env(Bridge):
    """The 24 game as an ``ActionableEnv``."""

    name = "toy24"
    open_instances = True  # any numbers are a puzzle ("2,5,7,11" in any split); splits are fixed
    reference_complete = True  # the solver searches from any numbers: no plan means a dead end

    def __init__(self, n_generated: int = 100, generator_seed: int = 0) -> None:
        self.n_generated, self.generator_seed = n_generated, generator_seed
        self.puzzle: list[int] = []
        self.numbers: list[Fraction] = []
        self.target = 24
        self.history: list[dict[str, Any]] = []
        self.steps = 0
        self.stopped = False

    def tools(self) -> list[ToolSpec]:
        """The tools; once a puzzle is loaded, positions carry their real range (0..n-1)."""
        return _tools_for(len(self.puzzle)) if self.puzzle else TOOLS

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        if split is not None and split not in SPLITS:
            raise errors.UnknownNameError("Toy24 split", split, list(SPLITS))
        out: list[TaskRef] = []
        for name in [split] if split else list(SPLITS):
            ids = generate(self.n_generated, self.generator_seed) if name == "generated" else CURATED[name]
            out += [TaskRef(suite="toy24", split=name, instance_id=i) for i in ids]
        return out

    def canonical_task(self, task: TaskRef) -> str:
        """The puzzle a task id names, whatever the order of its numbers (``9,2,6,9`` and
        ``2,6,9,9`` are one puzzle): what keeps held-out tasks apart from training ones."""
        numbers, target = parse_instance(task.instance_id)
        return f"{','.join(map(str, sorted(numbers)))}->{target}"

    def canonical_state(self) -> str:
        """The puzzle the current numbers pose, in ``canonical_task``'s form: a staged start
        (numbers already combined) can be a held-out puzzle in disguise."""
        return f"{','.join(sorted((fmt(x) for x in self.numbers), key=lambda t: (Fraction(t), t)))}->{self.target}"

    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        task = task or TaskRef(suite="toy24", split="easy", instance_id=CURATED["easy"][0])
        self.puzzle, self.target = parse_instance(task.instance_id)
        self.task = task
        self.numbers = [Fraction(x) for x in self.puzzle]
        self.history, self.steps, self.stopped = [], 0, False
        return ResetResult(observation=self.observe(), info={"task": str(task)})

    def _step(self, action: Action) -> EnvResponse:
        self.steps += 1
        if self.stopped:
            return self.error_response("The game is over; stop() was already called.", kind="episode_over")
        if action.tool == "stop":
            self.stopped = True
            return EnvResponse(observation=self.observe(), terminated=True,
                               reward=1.0 if self._reached() else 0.0)
        if action.tool == "reset":
            self.numbers = [Fraction(x) for x in self.puzzle]
            self.history = []
            return EnvResponse(observation=self.observe())
        i, j, op = action.args["i"], action.args["j"], action.args["op"]
        n = len(self.numbers)
        if not (0 <= i < n and 0 <= j < n) or i == j:
            return self.error_response(
                f"positions must be two different integers in 0..{n - 1}; got i={i}, j={j}.",
                kind="bad_position")
        nxt = solver.combine(self.numbers, i, j, op)
        if nxt is None:
            return self.error_response("division by zero.", kind="division_by_zero")
        self.history.append({"i": i, "j": j, "op": op, "result": fmt(nxt[-1])})
        self.numbers = nxt
        return EnvResponse(observation=self.observe())

    def _reached(self) -> bool:
        return any(x == self.target for x in self.numbers)

    def observe(self) -> Observation:
        nums = [fmt(x) for x in self.numbers]
        listed = ", ".join(f"[{k}] {v}" for k, v in enumerate(nums))
        if self.stopped:
            verdict = "You reached the target." if self._reached() else "You did not reach the target."
            text = f"Game over. Numbers: {listed}. {verdict}"
        else:
            text = (f"Target: {self.target}. Numbers: {listed}. Combine two numbers with "
                    "combine(i, j, op), op in add/sub/mul/div; call stop() when a number "
                    f"equals {self.target}.")
        return Observation(text=text, data={"numbers": nums, "target": self.target})

    def evaluate(self) -> EvaluationResult:
        success = self.stopped and self._reached()
        return EvaluationResult(success=success, score=1.0 if success else 0.0,
                                metrics={"steps": self.steps, "numbers": [fmt(x) for x in self.numbers]})

    def get_env_state(self) -> dict[str, Any]:
        return {"puzzle": list(self.puzzle), "numbers": [fmt(x) for x in self.numbers],
                "target": self.target, "history": [dict(h) for h in self.history],
                "steps": self.steps, "reached_target": self._reached(), "stopped": self.stopped}

    def env_state_schema(self) -> dict[str, Any]:
        return STATE_SCHEMA

    def tunable_parameters(self) -> dict[str, dict[str, Any]]:
        return {
            "size": {"low": 3, "high": 5, "default": 4, "harder": 1,
                     "description": "how many numbers the puzzle has (more: longer plans)"},
            "max_number": {"low": 6, "high": 13, "default": 13, "harder": 1,
                           "description": "the largest number drawn (larger: fewer easy products)"},
        }

    def task_for(self, params: Mapping[str, Any], rng: Any) -> TaskRef:
        declared = self.tunable_parameters()
        for name, value in params.items():  # outside the declared bounds is refused (a size of 12 stalls the solver)
            bound = declared.get(name)
            if bound is None or type(value) is not int or not bound["low"] <= value <= bound["high"]:
                allowed = ", ".join(f"{n} {b['low']}..{b['high']}" for n, b in declared.items())
                raise errors.SpecError(f"Toy24 parameter {name}={value!r} is not a declared tunable parameter "
                                       f"within its bounds ({allowed})")
        size, top = params.get("size", 4), params.get("max_number", 13)
        for _ in range(10_000):
            nums = sorted(rng.randint(1, top) for _ in range(size))
            if solver.solvable(nums):
                return TaskRef(suite="toy24", split="generated", instance_id=",".join(map(str, nums)))
        raise errors.EnvError(f"No solvable Toy24 puzzle with size={size}, max_number={top} after 10,000 draws")

    def error_kinds(self) -> dict[str, str]:
        """Toy24's refusals are the policy's action errors (axis A)."""
        return {**super().error_kinds(), "bad_position": "A", "division_by_zero": "A"}

    def reference_actions(self) -> list[Action] | None:
        """The solver's plan from the current numbers (any state: a policy's detour, a
        stage's start); after stop() nothing is left to play: ``[]`` when it won, ``None``
        (no win possible) when it did not."""
        if self.stopped:
            return [] if self._reached() else None
        return self.solve()

    def solve(self) -> list[Action] | None:
        """The solver's plan from the current numbers, as actions ending with stop()."""
        plan = solver.solve(self.numbers, self.target)
        if plan is None:
            return None
        return [Action(tool="combine", args={"i": i, "j": j, "op": op}) for i, j, op in plan] + \
            [Action(tool="stop")]
