"""The ``random`` policy: random tool calls generated from the tools' JSON Schemas.

For fuzzing: every call is valid against its schema (enums, integer and number bounds,
string lengths, arrays, nested objects, ``anyOf``/``oneOf``, ``const``), so the env's
own rules get exercised rather than argument validation; ``invalid_rate`` mixes in calls
that break the schema, to exercise bad-action handling too. When the observation lists
admissible commands, a single-tool text env gets one of them most of the time.
Deterministic: the same seed, task and episode count give the same calls.
"""

from __future__ import annotations

import hashlib
import random
import string
from typing import Any

from ...types import Action, Observation, TaskRef, ToolSpec
from ..policy import PolicyStep
from .calls import text_tool
from .chat import describe

_ALPHABET = string.ascii_letters + string.digits + " _-"


def sample(schema: dict[str, Any], rng: random.Random, *, int_range: tuple[int, int] = (-2, 8),
           depth: int = 0) -> Any:
    """A random value valid against ``schema`` (the subset tools use)."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return sample(rng.choice(schema[key]), rng, int_range=int_range, depth=depth)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "integer":
        lo = schema.get("minimum", int_range[0] if "maximum" not in schema else schema["maximum"] - 10)
        hi = schema.get("maximum", max(lo, int_range[1]))
        return rng.randint(int(lo), int(hi))
    if kind == "number":
        return rng.uniform(schema.get("minimum", -10.0), schema.get("maximum", 10.0))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        lo = schema.get("minItems", 0)
        n = rng.randint(lo, max(lo, min(schema.get("maxItems", lo + 3), lo + 3)))
        items: dict[str, Any] = schema["items"] if isinstance(schema.get("items"), dict) else {}
        return [sample(items, rng, int_range=int_range, depth=depth + 1) for _ in range(n)]
    if kind == "object":
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        return {k: sample(v, rng, int_range=int_range, depth=depth + 1) for k, v in props.items()
                if k in required or (depth < 4 and rng.random() < 0.5)}
    lo = schema.get("minLength", 0)
    n = rng.randint(lo, max(lo, min(schema.get("maxLength", lo + 12), lo + 12)))
    return "".join(rng.choice(_ALPHABET) for _ in range(n))


def break_schema(tools: list[ToolSpec], rng: random.Random) -> Action:
    """A call that violates the schema: an unknown tool, a wrong type, an unknown argument."""
    tool = rng.choice(tools)
    props = list((tool.parameters or {}).get("properties") or {})
    choice = rng.randrange(3)
    if choice == 0 or not props:
        return Action(tool=tool.name + "_" + "".join(rng.choices(string.ascii_lowercase, k=4)))
    args = {k: [{"nested": True}] for k in props} if choice == 1 else {"unexpected_argument": 1}
    return Action(tool=tool.name, args=args)


class RandomPolicy:
    """Random schema-valid calls. Spec name ``random`` or ``random:SEED``.

    :param seed: base seed (the ARG); mixed with the task and an episode counter.
    :param weights: tool name → relative weight (e.g. lower ``stop`` to play longer).
    :param int_range: bounds for integers whose schema has none.
    :param invalid_rate: probability of a schema-breaking call instead.
    :param admissible_rate: probability of picking an admissible command when offered.
    """

    def __init__(self, arg: str | int | None = None, *, seed: int | None = None,
                 weights: dict[str, float] | None = None, int_range: tuple[int, int] = (-2, 8),
                 invalid_rate: float = 0.0, admissible_rate: float = 0.9) -> None:
        self.seed = int(seed if seed is not None else (arg if arg not in (None, "") else 0))
        self.weights, self.int_range = dict(weights or {}), (int(int_range[0]), int(int_range[1]))
        self.invalid_rate, self.admissible_rate = invalid_rate, admissible_rate
        self.policy_id = describe("random", str(self.seed), invalid_rate=invalid_rate or None)
        self._episodes: dict[str, int] = {}
        self._rng = random.Random(self.seed)

    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        key = str(task)
        count = self._episodes[key] = self._episodes.get(key, -1) + 1
        # the episode seed when the runner gives one; else how often this task was played
        digest = hashlib.sha256(f"{self.seed}|{key}|{count if seed is None else 's' + str(seed)}".encode()).digest()
        self._rng = random.Random(int.from_bytes(digest[:8], "big"))

    def act(self, observation: Observation, tools: list[ToolSpec]) -> PolicyStep:
        rng = self._rng
        if not tools:
            return PolicyStep(action=None, raw=None, invalid="the env offers no tools")
        if self.invalid_rate and rng.random() < self.invalid_rate:
            action = break_schema(tools, rng)
            return PolicyStep(action=action, raw={"tool": action.tool, "args": action.args, "breaks_schema": True})
        admissible = observation.data.get("admissible_commands")
        single = text_tool(tools)
        if single and isinstance(admissible, (list, tuple)) and admissible and rng.random() < self.admissible_rate:
            tool, param = single
            action = Action(tool=tool.name, args={param: str(rng.choice(admissible))})
        else:
            tool = rng.choices(tools, weights=[self.weights.get(t.name, 1.0) for t in tools])[0]
            schema = dict(tool.parameters or {})
            schema.setdefault("type", "object")
            schema["required"] = list(schema.get("required") or [])
            action = Action(tool=tool.name, args=sample(schema, rng, int_range=self.int_range))
        return PolicyStep(action=action, raw={"tool": action.tool, "args": action.args})

    def close(self) -> None:
        """Nothing to release."""
