"""Exports of stored trajectories for trainers, built from what the model saw and said.

Formats (``envh export --format ...``; loader lines in core/README.md):

* ``messages`` (JSONL) and ``trl`` (JSONL): one conversation per trajectory,
  ``{"messages": [...], "tools": [...]}``: the first request as sent (system prompt,
  first observation), then each reply exactly as the model wrote it (text, and native
  ``tool_calls`` with ``arguments`` as a mapping, as chat templates expect) and the next
  turn's messages as sent (``tool`` answers to calls, user observations). ``trl`` writes
  ``tools`` as a JSON string, which TRL decodes, so any ``datasets`` version loads it.
* ``parquet``: the same conversation with ``messages`` and ``tools`` as lists of Arrow
  JSON values (``datasets`` decodes each to the dict), beside the index columns and the
  full trajectory as JSON.
* ``verl``: Parquet for verl's multi-turn SFT dataset: ``messages`` as native structs
  (pandas reads them as dicts; tool-call ``arguments`` as the strings the model wrote)
  and ``tools`` as the exact JSON text of the tool list. Arrow gives every struct of a
  column the same fields, so tools stored as structs would each carry the other tools'
  parameter names as nulls and the chat template would render schemas the model never
  saw; ``envh.rollout.verl_dataset`` is verl's dataset with the two columns decoded
  (``verl_messages``/``verl_tools`` for any other reader).
* ``sft``: token level, from the recorded token ids (never retokenised): ``input_ids``,
  ``labels`` (-100 outside the model's tokens), ``loss_mask``/``completion_mask``,
  ``logprobs`` (null for a row with a turn whose engine gave none) and the rewards. Consecutive turns whose prompt extends the previous
  prompt and completion form one row; otherwise a turn starts a new row.

Trajectories written before turns were recorded (and non-model policies) fall back to
the actions: each as an assistant tool call.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .. import errors
from .trajectory import ModelTurn, Trajectory, request_messages, token_ids, tools_block, trajectory_to_json

FORMATS = ("messages", "trl", "parquet", "verl", "sft")
_DEFAULT_NAMES = {"messages": "trajectories.jsonl", "trl": "trajectories.trl.jsonl",
                  "parquet": "trajectories.parquet", "verl": "trajectories.verl.parquet",
                  "sft": "trajectories.tokens.jsonl"}


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                              "parameters": t.get("parameters") or {"type": "object"}}}
            for t in tools]


def _arguments(raw: Any) -> Any:
    """A call's arguments as chat templates take them: the mapping when the model's
    string is a JSON object, else the string itself (what the model wrote)."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            return raw
        return value if isinstance(value, dict) else raw
    return raw


def reply_message(turn: ModelTurn, raw_arguments: bool = False) -> dict[str, Any]:
    """The assistant message exactly as the model produced it (``raw_arguments``: each
    call's arguments as the string the model wrote, else as a mapping where it is one)."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.prefill + (turn.text or "")}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c.get("name"),
                          "arguments": c.get("arguments") if raw_arguments else _arguments(c.get("arguments"))}}
            for c in turn.tool_calls]
    return message


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if v is not None}
    out["content"] = message.get("content") or ""
    if "tool_calls" in out:
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": _arguments(c["function"]["arguments"])}}
                             for c in out["tool_calls"]]
    return out


def _new_messages(request: list[dict[str, Any]], first: Any) -> list[dict[str, Any]]:
    """The messages a turn added: everything after the last assistant message. A request
    whose whole history was dropped to fit the context has none: then it is what follows
    the system prompt, less the first observation it kept (``first``; the context fitting
    joins it and the current observation into one user message)."""
    last = max((i for i, m in enumerate(request) if m.get("role") == "assistant"), default=None)
    if last is not None:
        return request[last + 1:]
    new = [m for m in request if m.get("role") != "system"]
    if new and new[0].get("role") == "user" and isinstance(first, str):
        content = new[0].get("content")
        if content == first:
            new = new[1:]
        elif isinstance(content, str) and content.startswith(first + "\n\n"):
            new = [{**new[0], "content": content[len(first) + 2:]}, *new[1:]]
    return new


def to_messages(trajectory: Trajectory, system: str | None = None, raw_arguments: bool = False) -> list[dict[str, Any]]:
    """The trajectory as the conversation the model had (see the module docstring)."""
    if not any(s.turn is not None for s in trajectory.steps):
        return _from_actions(trajectory, system)
    messages: list[dict[str, Any]] = []
    first: Any = None
    for step, request in zip(trajectory.steps, request_messages(trajectory.steps), strict=True):
        if step.turn is None or request is None:
            continue
        if not messages:
            first = next((m.get("content") for m in request if m.get("role") == "user"), None)
        messages += [_clean(m) for m in (request if not messages else _new_messages(request, first))]
        messages.append(reply_message(step.turn, raw_arguments))
    if system and messages and messages[0]["role"] == "system":
        messages[0] = {"role": "system", "content": system}
    return messages


def _from_actions(trajectory: Trajectory, system: str | None) -> list[dict[str, Any]]:
    """Trajectories without model turns (scripted and random policies, old runs)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    first = trajectory.initial_observation
    messages.append({"role": "user", "content": first.text if first is not None else ""})
    for step in trajectory.steps:
        if step.proposed is None:
            raw = step.raw if isinstance(step.raw, str) else json.dumps(step.raw, ensure_ascii=False, default=repr)
            messages.append({"role": "assistant", "content": raw})
            messages.append({"role": "user", "content": step.observation.text})
            continue
        call_id = f"call_{step.index}"
        messages.append({"role": "assistant", "content": "", "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": step.proposed.tool, "arguments": dict(step.proposed.args)}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": step.observation.text})
    return messages


def tools_of(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The tool schemas the model was shown (from the turns), else the env's tools."""
    return tools_block(trajectory.steps) or openai_tools(trajectory.tools)


def _meta(t: Trajectory) -> dict[str, Any]:
    return {"reward": t.total_reward, "success": t.success,
            "score": None if t.verdict is None else float(t.verdict.score), "run_id": t.run_id, "key": t.key,
            "spec_id": t.spec_id, "task": None if t.task is None else str(t.task),
            "split": None if t.task is None else t.task.split, "seed": t.seed, "policy_id": t.policy_id,
            "error_class": t.error_class}


def to_record(trajectory: Trajectory, system: str | None = None) -> dict[str, Any]:
    return {"messages": to_messages(trajectory, system), "tools": tools_of(trajectory), **_meta(trajectory)}


def select(trajectories: Iterable[Trajectory], *, success: bool | None = None, split: str | None = None,
           spec: str | None = None, min_reward: float | None = None) -> Iterator[Trajectory]:
    """The trajectories passing every given filter (``spec``: a spec id or its prefix)."""
    if min_reward is not None and not math.isfinite(min_reward):
        raise errors.EnvhError(f"--min-reward must be a finite number, got {min_reward}")
    for t in trajectories:
        if success is not None and t.success != success:
            continue
        if split is not None and (t.task is None or t.task.split != split):
            continue
        if spec is not None and not t.spec_id.startswith(spec):
            continue
        if min_reward is not None and t.total_reward < min_reward:
            continue
        yield t


def check_output(path: str | Path) -> Path:
    """``path`` if its directory exists, else a clear error (never a traceback)."""
    out = Path(path)
    if out.is_dir():
        raise errors.EnvhError(f"The export output {out} is a directory; give a file name inside it.")
    if not out.parent.is_dir():
        raise errors.EnvhError(f"The export output's directory {out.parent} does not exist; create it first "
                               f"(mkdir -p {out.parent}) or choose another --output.")
    return out


def _jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    n = 0
    with open(check_output(path), "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=repr) + "\n")
            n += 1
    return n


def write_messages(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None) -> int:
    """Write chat-format JSONL; returns the number of conversations."""
    return _jsonl((to_record(t, system) for t in trajectories), path)


def write_trl(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None) -> int:
    """Chat JSONL for TRL's SFTTrainer: ``tools`` as a JSON string (TRL decodes it)."""
    rows = ({**r, "tools": json.dumps(r["tools"], ensure_ascii=False)} for r in
            (to_record(t, system) for t in trajectories))
    return _jsonl(rows, path)


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise errors.EnvhError("Parquet export needs pyarrow: pip install 'envh[export]'") from exc
    return pa, pq


def _json_lists(pa: Any, lists: list[list[Any]]) -> Any:
    """A list<arrow.json> column: each element one JSON value (``datasets`` decodes it)."""
    offsets, flat = [0], []
    for items in lists:
        flat += [json.dumps(x, ensure_ascii=False, default=repr) for x in items]
        offsets.append(len(flat))
    values = pa.ExtensionArray.from_storage(pa.json_(), pa.array(flat, type=pa.string()))
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values)


INDEX = [("run_id", "string"), ("key", "string"), ("attempt", "int64"), ("final", "bool_"),
         ("spec_id", "string"), ("task", "string"), ("split", "string"), ("instance_id", "string"),
         ("seed", "int64"), ("policy", "string"), ("policy_id", "string"), ("success", "bool_"),
         ("score", "float64"), ("reward", "float64"), ("steps", "int64"), ("invalid_steps", "int64"),
         ("stop", "string"), ("error_class", "string"), ("error", "string"), ("duration_s", "float64"),
         ("prompt_tokens", "int64"), ("completion_tokens", "int64"), ("versions", "string"),
         ("trajectory", "string")]


def _index_row(t: Trajectory) -> dict[str, Any]:
    return {"run_id": t.run_id, "key": t.key, "attempt": t.attempt, "final": t.final, "spec_id": t.spec_id,
            "task": None if t.task is None else str(t.task), "split": None if t.task is None else t.task.split,
            "instance_id": None if t.task is None else t.task.instance_id, "seed": t.seed, "policy": t.policy,
            "policy_id": t.policy_id, "success": t.success,
            "score": None if t.verdict is None else float(t.verdict.score), "reward": t.total_reward,
            "steps": len(t.steps), "invalid_steps": t.invalid_steps, "stop": t.stop, "error_class": t.error_class,
            "error": t.error, "duration_s": t.duration_s, "prompt_tokens": t.usage.get("prompt_tokens", 0),
            "completion_tokens": t.usage.get("completion_tokens", 0),
            "versions": json.dumps(t.versions, sort_keys=True), "trajectory": trajectory_to_json(t)}


def write_parquet(trajectories: Iterable[Trajectory], path: str | Path) -> int:
    """One Parquet row per trajectory: index columns, ``messages``/``tools`` (JSON values)
    and the full trajectory; needs ``pip install 'envh[export]'``."""
    pa, pq = _pyarrow()
    out = check_output(path)
    items = list(trajectories)
    columns = {name: pa.array([_index_row(t)[name] for t in items], type=getattr(pa, kind)())
               for name, kind in INDEX}
    columns["messages"] = _json_lists(pa, [to_messages(t) for t in items])
    columns["tools"] = _json_lists(pa, [tools_of(t) for t in items])
    pq.write_table(pa.table(columns), str(out))
    return len(items)


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


def write_verl(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None) -> int:
    """Parquet for verl's ``MultiTurnSFTDataset`` (``data.multiturn.messages_key=messages``,
    ``tools_key=tools``; decoded by ``envh.rollout.verl_dataset``), with the rewards and
    ids as extra columns."""
    pa, pq = _pyarrow()
    out = check_output(path)
    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                         ("tool_call_id", pa.string())])
    rows = [({**_meta(t), "messages": to_messages(t, system, raw_arguments=True), "tools": tools_of(t)}, t)
            for t in trajectories]
    table = pa.table({
        "messages": pa.array([[verl_message(m) for m in r["messages"]] for r, _ in rows], type=pa.list_(message)),
        "tools": pa.array([json.dumps(r["tools"], ensure_ascii=False) for r, _ in rows], type=pa.string()),
        "reward": pa.array([r["reward"] for r, _ in rows], type=pa.float64()),
        "success": pa.array([r["success"] for r, _ in rows], type=pa.bool_()),
        "key": pa.array([r["key"] for r, _ in rows], type=pa.string()),
        "spec_id": pa.array([r["spec_id"] for r, _ in rows], type=pa.string()),
        "task": pa.array([r["task"] for r, _ in rows], type=pa.string())})
    pq.write_table(table, str(out))
    return len(rows)


def token_rows(trajectory: Trajectory) -> Iterator[dict[str, Any]]:
    """Token-level rows of one trajectory from its recorded ids (see the module docstring)."""
    t = trajectory
    row: dict[str, Any] | None = None

    def finish(r: dict[str, Any]) -> dict[str, Any]:
        r["labels"] = [tok if m else -100 for tok, m in zip(r["input_ids"], r["loss_mask"], strict=True)]
        r["attention_mask"] = [1] * len(r["input_ids"])
        r["completion_mask"] = list(r["loss_mask"])
        return r

    for step, ids in zip(t.steps, token_ids(t.steps), strict=True):
        turn = step.turn
        if turn is None or ids is None:
            continue
        prompt, completion = ids
        # a turn without a logprob for each of its tokens has none: 0.0 would say the
        # sampler was certain, and a trainer would take it as the behaviour policy's
        logprobs = list(turn.logprobs) if turn.logprobs is not None and len(turn.logprobs) == len(completion) \
            and all(isinstance(x, (int, float)) and math.isfinite(x) for x in turn.logprobs) else None
        if row is not None and prompt[:len(row["input_ids"])] == row["input_ids"]:
            gap = prompt[len(row["input_ids"]):]
        else:
            if row is not None:
                yield finish(row)
            row = {**_meta(t), "turns": [], "step_rewards": [], "input_ids": [], "loss_mask": [], "logprobs": []}
            gap = prompt
        row["input_ids"] += gap + completion
        row["loss_mask"] += [0] * len(gap) + [1] * len(completion)
        if row["logprobs"] is not None:
            row["logprobs"] = None if logprobs is None else row["logprobs"] + [0.0] * len(gap) + logprobs
        row["turns"].append(step.index)
        row["step_rewards"].append(step.reward)
    if row is not None:
        yield finish(row)


def write_tokens(trajectories: Iterable[Trajectory], path: str | Path) -> int:
    """Token-level rows as JSONL (or Parquet when ``path`` ends in ``.parquet``); an error
    when no turn recorded token ids (the policy's engine did not give them)."""
    rows = [r for t in trajectories for r in token_rows(t)]
    if not rows:
        raise errors.EnvhError("No turn in the selection recorded token ids, so there is nothing token-level to "
                               "export. The local policy records them, and the openai policy against vLLM with "
                               "token_ids=true; use --format messages for the others.")
    if str(path).endswith(".parquet"):
        pa, pq = _pyarrow()
        pq.write_table(pa.Table.from_pylist(rows), str(check_output(path)))
        return len(rows)
    return _jsonl(rows, path)


def export(trajectories: Iterable[Trajectory], fmt: str, path: str | Path, *, system: str | None = None) -> int:
    """Write ``trajectories`` in format ``fmt`` to ``path``; returns the rows written."""
    check_output(path)
    try:
        return _write(trajectories, fmt, path, system)
    except OSError as exc:
        raise errors.EnvhError(f"Cannot write the export to {path}: {exc}") from exc


def _write(trajectories: Iterable[Trajectory], fmt: str, path: str | Path, system: str | None) -> int:
    if fmt == "messages":
        return write_messages(trajectories, path, system)
    if fmt == "trl":
        return write_trl(trajectories, path, system)
    if fmt == "parquet":
        return write_parquet(trajectories, path)
    if fmt == "verl":
        return write_verl(trajectories, path, system)
    if fmt == "sft":
        return write_tokens(trajectories, path)
    raise errors.EnvhError(f"Unknown export format {fmt!r}. Choose one of: {', '.join(FORMATS)}")


def default_path(run_dir: str | Path, fmt: str) -> Path:
    return Path(run_dir) / _DEFAULT_NAMES[fmt]
