"""Long episodes as the runner records them, for the trajectory page's tests and
``bench/ui_trajectory.py``: a chat episode whose every turn resends the whole history (its
prompts grow quadratically), and a Toy24 episode of thousands of steps with a sliding
context window. Built from the real records and written through the real store."""

from __future__ import annotations

import hashlib
from pathlib import Path

from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import ModelTurn, StepRecord, Trajectory
from envh.types import Action, EvaluationResult, Observation, TaskRef

SYSTEM = {"role": "system", "content": "You play Toy24. Combine the numbers to make 24. " * 40}


def _address(message: dict[str, str]) -> str:
    return hashlib.sha256(repr(sorted(message.items())).encode()).hexdigest()[:16]


def _turn(history: list[dict[str, str]], sent: set[str], reply: str) -> ModelTurn:
    """A turn that sent ``history``: each message's blob only the first time it is sent."""
    addresses = [_address(m) for m in history]
    blobs = {a: m for a, m in zip(addresses, history) if a not in sent}
    sent.update(blobs)
    return ModelTurn(messages=addresses, blobs=blobs, text=reply, completion_token_ids=list(range(12)))


def episode(steps: int, *, window: int | None = None, key: str = "long") -> Trajectory:
    """``steps`` steps, each with a model turn; ``window``: the turns of history each prompt
    keeps (``None``: all of them, the chat case)."""
    history: list[dict[str, str]] = []
    sent: set[str] = set()
    records = []
    for i in range(steps):
        observation = f"Step {i}: numbers [0] {i % 13 + 1}, [1] {i % 7 + 2}. " + "Board state. " * 30
        kept = history if window is None else history[-2 * window:]
        reply = f"I will combine 0 and 1 with add (turn {i})."
        turn = _turn([SYSTEM, *kept, {"role": "user", "content": observation}], sent, reply)
        history += [{"role": "user", "content": observation}, {"role": "assistant", "content": reply}]
        records.append(StepRecord(index=i, proposed=Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                                  executed=Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
                                  observation=Observation(text=f"Numbers after step {i}: [0] {i % 24}."),
                                  reward=0.0, turn=turn, policy_s=0.01, env_s=0.001,
                                  effects=[{"layer": "budget", "kind": "count", "step": i}]))
    return Trajectory(key=key, run_id="long", spec_id="s" * 16, task=TaskRef(suite="toy24", split="medium",
                      instance_id="1,2,6,6"), seed=0, policy="local:SmolLM2", steps=tuple(records),
                      verdict=EvaluationResult(success=False, score=0.0), stop="max_steps",
                      initial_observation=Observation(text="Numbers: [0] 1, [1] 2, [2] 6, [3] 6."))


def write(out: Path, episodes: list[Trajectory]) -> Path:
    """The episodes in a run directory's store (seq 1, 2, ... in order)."""
    with TrajectoryStore(out) as store:
        store.create_run("long", {"config": {"policy": "local:SmolLM2"}})
        for t in episodes:
            store.append(t)
    return out
