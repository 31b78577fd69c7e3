"""verl's two Parquet layouts: multi-turn SFT (``verl``) and the RL prompts (``verl-rl``).

``verl`` keeps ``messages`` as native structs and ``tools`` as the exact JSON text of the
tool list: Arrow gives every struct of a column the same fields, so tools stored as
structs would each carry the other tools' parameter names as nulls and the chat template
would render schemas the model never saw. ``decode_verl_frame`` (and the dataset in
``envh.rollout.verl_dataset``) turns both back into what the model was shown and wrote.

``verl-rl`` is what verl's ``RLHFDataset`` reads: ``prompt`` (the episode's first request
as sent), ``data_source``, ``reward_model`` (``{"style": "rule", "ground_truth": task}``)
and ``extra_info`` (``index`` and the episode's ids, reward and tools as JSON text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .. import errors
from .samples import Sample, openai_tools
from .trajectory import Trajectory, request_messages, request_tools


def verl_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` as a ``verl`` row stores it: every message has the four fields (Arrow
    structs share one field set), call ``arguments`` are strings."""
    calls = [{"id": c.get("id") or "", "type": "function",
              "function": {"name": c["function"]["name"],
                           "arguments": c["function"]["arguments"] if isinstance(c["function"]["arguments"], str)
                           else json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
             for c in message.get("tool_calls") or []]
    return {"role": message["role"], "content": message.get("content") or "", "tool_calls": calls or None,
            "tool_call_id": message.get("tool_call_id")}


def _plain(value: Any) -> Any:
    """``value`` as pandas/pyarrow read it (numpy arrays, nested) as plain lists and dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [_plain(v) for v in value]
    return value


def verl_messages(cell: Any) -> list[dict[str, Any]]:
    """A ``messages`` cell of a ``verl`` export, as pandas or pyarrow read it, as the
    conversation: plain lists, and without the fields Arrow gives a message that had
    none (``tool_calls``/``tool_call_id`` as null)."""
    return [{k: v for k, v in m.items() if v is not None} for m in _plain(cell)]


def verl_tools(cell: Any) -> list[dict[str, Any]]:
    """A ``tools`` cell of a ``verl`` export (the exact JSON text) as the tool list the
    model was shown."""
    value = json.loads(cell) if isinstance(cell, (str, bytes)) else _plain(cell)
    if not isinstance(value, list):
        raise errors.EnvhError(f"A verl tools cell holds {type(value).__name__}, not a list of tools")
    return value


def decode_verl_frame(frame: Any, messages_key: str = "messages", tools_key: str = "tools") -> Any:
    """A pandas frame read from a ``verl`` export with ``messages`` and ``tools`` decoded
    (``verl_messages``, ``verl_tools``): what verl's dataset then hands the chat template."""
    import pandas as pd  # type: ignore[import-untyped]

    frame = frame.copy()
    frame[messages_key] = pd.Series([verl_messages(c) for c in frame[messages_key]], index=frame.index, dtype=object)
    if tools_key in frame.columns:
        frame[tools_key] = pd.Series([verl_tools(c) for c in frame[tools_key]], index=frame.index, dtype=object)
    return frame


def sft_table(pa: Any, rows: list[tuple[dict[str, Any], Sample]]) -> Any:
    """The ``verl`` table of (meta, sample) rows; ``prompt_messages`` counts the leading
    messages of a per-request row that are its request (0: a conversation)."""
    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                         ("tool_call_id", pa.string())])
    return pa.table({
        "messages": pa.array([[verl_message(m) for m in s.messages] for _, s in rows], type=pa.list_(message)),
        "tools": pa.array([json.dumps(s.tools, ensure_ascii=False) for _, s in rows], type=pa.string()),
        "prompt_messages": pa.array([s.prompt for _, s in rows], type=pa.int64()),
        "turns": pa.array([s.turns for _, s in rows], type=pa.list_(pa.int64())),
        "reward": pa.array([m["reward"] for m, _ in rows], type=pa.float64()),
        "success": pa.array([m["success"] for m, _ in rows], type=pa.bool_()),
        "key": pa.array([m["key"] for m, _ in rows], type=pa.string()),
        "spec_id": pa.array([m["spec_id"] for m, _ in rows], type=pa.string()),
        "task": pa.array([m["task"] for m, _ in rows], type=pa.string())})


def first_request(trajectory: Trajectory, system: str | None = None) -> tuple[list[dict[str, str]], list[Any]]:
    """The episode's first request as sent (role and text of each message) and the tools it
    sent natively; the first observation (and ``system``) for an episode without turns."""
    for step, request, tools in zip(trajectory.steps, request_messages(trajectory.steps),
                                    request_tools(trajectory.steps), strict=True):
        if step.turn is not None and request is not None:
            prompt = [{"role": str(m.get("role")), "content": m.get("content") or ""} for m in request]
            if system and prompt and prompt[0]["role"] == "system":
                prompt[0] = {"role": "system", "content": system}
            return prompt, tools or []
    first = trajectory.initial_observation
    prompt = [{"role": "system", "content": system}] if system else []
    return [*prompt, {"role": "user", "content": first.text if first is not None else ""}], \
        openai_tools(trajectory.tools)


def rl_table(pa: Any, trajectories: Iterable[Trajectory], system: str | None) -> Any:
    """The ``verl-rl`` table: one row per trajectory (see the module docstring)."""
    prompts, sources, rewards, extras = [], [], [], []
    for n, t in enumerate(trajectories):
        prompt, tools = first_request(t, system)
        task = None if t.task is None else str(t.task)
        prompts.append(prompt)
        sources.append(f"envh/{t.task.suite if t.task is not None else 'unknown'}")
        rewards.append({"style": "rule", "ground_truth": task or ""})
        extras.append({"index": n, "key": t.key, "run_id": t.run_id, "spec_id": t.spec_id, "task": task,
                       "split": None if t.task is None else t.task.split, "seed": t.seed,
                       "reward": t.total_reward, "success": t.success,
                       "tools": json.dumps(tools, ensure_ascii=False)})
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    extra = pa.struct([("index", pa.int64()), ("key", pa.string()), ("run_id", pa.string()),
                       ("spec_id", pa.string()), ("task", pa.string()), ("split", pa.string()), ("seed", pa.int64()),
                       ("reward", pa.float64()), ("success", pa.bool_()), ("tools", pa.string())])
    return pa.table({
        "prompt": pa.array(prompts, type=pa.list_(message)),
        "data_source": pa.array(sources, type=pa.string()),
        "reward_model": pa.array(rewards, type=pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        "extra_info": pa.array(extras, type=extra)})
