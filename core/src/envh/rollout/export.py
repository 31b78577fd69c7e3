"""Exports of stored trajectories for trainers and analysis.

* ``messages`` (JSONL): one conversation per trajectory, in the chat format TRL and verl
  read: ``{"messages": [...], "tools": [...]}`` with the observation as the first user
  turn, each action as an assistant turn with ``tool_calls`` (arguments as a mapping, as
  Hugging Face chat templates expect) and each result as a ``tool`` turn. An invalid
  (unparseable) output is the assistant's raw text followed by the error as a user turn.
  Reward, success and the identifying fields ride along for filtering.
* ``parquet``: one row per trajectory: the index columns, the verdict, and the full
  trajectory and its messages as JSON strings (load with pyarrow, pandas, or
  ``datasets.load_dataset("parquet", data_files=...)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .. import errors
from .trajectory import Trajectory, trajectory_to_json


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                              "parameters": t.get("parameters") or {"type": "object"}}}
            for t in tools]


def to_messages(trajectory: Trajectory, system: str | None = None) -> list[dict[str, Any]]:
    """The trajectory as a multi-turn chat with tool calls."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    first = trajectory.initial_observation
    messages.append({"role": "user", "content": first.text if first is not None else ""})
    for step in trajectory.steps:
        if step.proposed is None:
            raw = step.raw if isinstance(step.raw, str) else json.dumps(step.raw, ensure_ascii=False)
            messages.append({"role": "assistant", "content": raw})
            messages.append({"role": "user", "content": step.observation.text})
            continue
        call_id = f"call_{step.index}"
        messages.append({"role": "assistant", "content": "", "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": step.proposed.tool, "arguments": dict(step.proposed.args)}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "name": step.proposed.tool,
                         "content": step.observation.text})
    return messages


def to_record(trajectory: Trajectory, system: str | None = None) -> dict[str, Any]:
    t = trajectory
    return {"messages": to_messages(t, system), "tools": openai_tools(t.tools),
            "reward": t.total_reward, "success": t.success,
            "score": None if t.verdict is None else t.verdict.score, "run_id": t.run_id, "key": t.key,
            "spec_id": t.spec_id, "task": None if t.task is None else str(t.task), "seed": t.seed,
            "policy_id": t.policy_id, "error_class": t.error_class}


def write_messages(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None) -> int:
    """Write chat-format JSONL; returns the number of conversations."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for t in trajectories:
            fh.write(json.dumps(to_record(t, system), ensure_ascii=False, default=repr) + "\n")
            n += 1
    return n


def _rows(trajectories: Iterable[Trajectory]) -> Iterator[dict[str, Any]]:
    for t in trajectories:
        yield {"run_id": t.run_id, "key": t.key, "attempt": t.attempt, "final": t.final,
               "spec_id": t.spec_id, "task": None if t.task is None else str(t.task),
               "split": None if t.task is None else t.task.split,
               "instance_id": None if t.task is None else t.task.instance_id, "seed": t.seed,
               "policy": t.policy, "policy_id": t.policy_id, "success": t.success,
               "score": None if t.verdict is None else float(t.verdict.score), "reward": t.total_reward,
               "steps": len(t.steps), "invalid_steps": t.invalid_steps, "stop": t.stop,
               "error_class": t.error_class, "error": t.error, "duration_s": t.duration_s,
               "prompt_tokens": t.usage.get("prompt_tokens", 0),
               "completion_tokens": t.usage.get("completion_tokens", 0),
               "versions": json.dumps(t.versions, sort_keys=True),
               "messages": json.dumps(to_messages(t), ensure_ascii=False, default=repr),
               "trajectory": trajectory_to_json(t)}


def write_parquet(trajectories: Iterable[Trajectory], path: str | Path) -> int:
    """Write one Parquet row per trajectory; needs ``pip install 'envh[export]'``."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise errors.EnvhError("Parquet export needs pyarrow: pip install 'envh[export]'") from exc
    rows = list(_rows(trajectories))
    schema = pa.schema([
        ("run_id", pa.string()), ("key", pa.string()), ("attempt", pa.int64()), ("final", pa.bool_()),
        ("spec_id", pa.string()), ("task", pa.string()), ("split", pa.string()),
        ("instance_id", pa.string()), ("seed", pa.int64()), ("policy", pa.string()),
        ("policy_id", pa.string()), ("success", pa.bool_()), ("score", pa.float64()),
        ("reward", pa.float64()), ("steps", pa.int64()), ("invalid_steps", pa.int64()),
        ("stop", pa.string()), ("error_class", pa.string()), ("error", pa.string()),
        ("duration_s", pa.float64()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
        ("versions", pa.string()), ("messages", pa.string()), ("trajectory", pa.string())])
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, str(path))
    return len(rows)
