"""Exports of stored trajectories for trainers, built from what the model saw and said.

Each chat format gives one of two kinds of sample (``envh.rollout.samples``):

* conversation (the default): the episode as one conversation: the first request as sent
  (system prompt, first observation), then each reply and the messages the next request
  added (``tool`` answers, user observations). Where the context was fitted (history
  dropped), a later reply follows more context than its request held. The conversation is
  split into rows where the tools or the system message sent change (``turns`` lists the
  steps whose replies a row holds), so each row has one tool list and one system prompt.
* per request (``per_request=True``, ``envh export --per-request``): one row per model
  request, exactly the messages sent, with that request's own tools and system message,
  and the reply.

A reply is what the model produced as it produced it: the text as generated where the
server's tool parser took calls out of it (``written``, e.g. ``<tool_call>{...}</tool_call>``),
else the text and the native ``tool_calls`` (which only a chat template that renders tool
calls shows; ``sft`` is exact whatever the template).

Formats (``envh export --format ...``; loader lines in core/README.md):

* ``messages`` (JSONL) and ``trl`` (JSONL): a conversation row is ``{"messages", "tools",
  "turns", ...}``; a per-request row is ``{"prompt": the request, "completion": [the reply],
  "tools", "turns", ...}`` (TRL's conversational prompt-completion layout, so the loss is
  on the reply only). Call ``arguments`` are mappings, as chat templates expect. ``trl``
  writes ``tools`` as a JSON string, which TRL decodes, so any ``datasets`` version loads it.
* ``parquet``: the same rows with the chat columns as lists of Arrow JSON values
  (``datasets`` decodes each to the dict), beside the index columns and the full
  trajectory as JSON.
* ``verl``: Parquet for verl's multi-turn SFT dataset (``envh.rollout.export_verl``):
  ``messages`` as native structs (a per-request row: the request then the reply, with
  ``prompt_messages`` saying how many lead messages are the request), ``tools`` as JSON text.
* ``verl-rl``: Parquet for verl's ``RLHFDataset``: one row per trajectory with ``prompt``
  (its first request as sent), ``data_source``, ``reward_model`` and ``extra_info``.
* ``sft``: token level, from the recorded token ids (never retokenised): ``input_ids``,
  ``labels`` (-100 outside the model's tokens), ``loss_mask``/``completion_mask``,
  ``logprobs`` (null for a row with a turn whose engine gave none) and the rewards.
  Conversation: consecutive turns whose prompt extends the previous prompt and completion
  form one row, otherwise a turn starts a new row; per request: one row per turn.

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
from .export_verl import decode_verl_frame, rl_table, sft_table, verl_message, verl_messages, verl_tools
from .samples import Sample, conversations, openai_tools, reply_message, requests, to_messages, tools_of
from .trajectory import Trajectory, strict_json, token_ids, trajectory_to_json

__all__ = ["FORMATS", "decode_verl_frame", "export", "openai_tools", "reply_message", "select", "to_messages",
           "token_rows", "tools_of", "verl_message", "verl_messages", "verl_tools", "write_tokens"]

FORMATS = ("messages", "trl", "parquet", "verl", "verl-rl", "sft")
_DEFAULT_NAMES = {"messages": "trajectories.jsonl", "trl": "trajectories.trl.jsonl",
                  "parquet": "trajectories.parquet", "verl": "trajectories.verl.parquet",
                  "verl-rl": "trajectories.verl-rl.parquet", "sft": "trajectories.tokens.jsonl"}


def _meta(t: Trajectory) -> dict[str, Any]:
    return {"reward": t.total_reward, "success": t.success,
            "score": None if t.verdict is None else float(t.verdict.score), "run_id": t.run_id, "key": t.key,
            "spec_id": t.spec_id, "task": None if t.task is None else str(t.task),
            "split": None if t.task is None else t.task.split, "seed": t.seed, "policy_id": t.policy_id,
            "error_class": t.error_class}


def samples(trajectory: Trajectory, system: str | None = None, *, per_request: bool = False,
            raw_arguments: bool = False) -> list[Sample]:
    """The trajectory's samples: one per request, or its conversation (split where the
    tools or the system message change)."""
    build = requests if per_request else conversations
    return build(trajectory, system, raw_arguments)


def chat_columns(sample: Sample) -> dict[str, Any]:
    """A sample's chat columns: ``messages`` (a conversation) or ``prompt``/``completion``
    (a request, then the reply), with ``tools`` and ``turns``."""
    if sample.prompt:
        return {"prompt": sample.messages[:sample.prompt], "completion": sample.messages[sample.prompt:],
                "tools": sample.tools, "turns": sample.turns}
    return {"messages": sample.messages, "tools": sample.tools, "turns": sample.turns}


def to_records(trajectory: Trajectory, system: str | None = None, per_request: bool = False) -> list[dict[str, Any]]:
    """The chat rows of one trajectory with its ids and rewards."""
    return [{**chat_columns(s), **_meta(trajectory)} for s in samples(trajectory, system, per_request=per_request)]


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
            fh.write(strict_json(row) + "\n")
            n += 1
    return n


def write_messages(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None,
                   per_request: bool = False) -> int:
    """Write chat-format JSONL; returns the number of rows."""
    return _jsonl((r for t in trajectories for r in to_records(t, system, per_request)), path)


def write_trl(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None,
              per_request: bool = False) -> int:
    """Chat JSONL for TRL's SFTTrainer: ``tools`` as a JSON string (TRL decodes it)."""
    rows = ({**r, "tools": json.dumps(r["tools"], ensure_ascii=False)}
            for t in trajectories for r in to_records(t, system, per_request))
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


def write_parquet(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None,
                  per_request: bool = False) -> int:
    """One Parquet row per sample: index columns, the chat columns (JSON values), ``turns``
    and the full trajectory; needs ``pip install 'envh[export]'``."""
    pa, pq = _pyarrow()
    out = check_output(path)
    rows = [(_index_row(t), chat_columns(s)) for t in trajectories for s in samples(t, system, per_request=per_request)]
    columns = {name: pa.array([index[name] for index, _ in rows], type=getattr(pa, kind)()) for name, kind in INDEX}
    for name in ("prompt", "completion") if per_request else ("messages",):
        columns[name] = _json_lists(pa, [chat[name] for _, chat in rows])
    columns["tools"] = _json_lists(pa, [chat["tools"] for _, chat in rows])
    columns["turns"] = pa.array([chat["turns"] for _, chat in rows], type=pa.list_(pa.int64()))
    pq.write_table(pa.table(columns), str(out))
    return len(rows)


def write_verl(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None,
               per_request: bool = False) -> int:
    """Parquet for verl's ``MultiTurnSFTDataset`` (``data.multiturn.messages_key=messages``,
    ``tools_key=tools``; decoded by ``envh.rollout.verl_dataset``), with the rewards and
    ids as extra columns."""
    pa, pq = _pyarrow()
    out = check_output(path)
    rows = [(_meta(t), s) for t in trajectories
            for s in samples(t, system, per_request=per_request, raw_arguments=True)]
    pq.write_table(sft_table(pa, rows), str(out))
    return len(rows)


def write_verl_rl(trajectories: Iterable[Trajectory], path: str | Path, system: str | None = None) -> int:
    """Parquet for verl's ``RLHFDataset``: one prompt row per trajectory."""
    pa, pq = _pyarrow()
    out = check_output(path)
    table = rl_table(pa, trajectories, system)
    pq.write_table(table, str(out))
    return int(table.num_rows)


def token_rows(trajectory: Trajectory, per_request: bool = False) -> Iterator[dict[str, Any]]:
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
        if row is not None and not per_request and prompt[:len(row["input_ids"])] == row["input_ids"]:
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


def write_tokens(trajectories: Iterable[Trajectory], path: str | Path, per_request: bool = False) -> int:
    """Token-level rows as JSONL (or Parquet when ``path`` ends in ``.parquet``); an error
    when no turn recorded token ids (the policy's engine did not give them)."""
    rows = [r for t in trajectories for r in token_rows(t, per_request)]
    if not rows:
        raise errors.EnvhError("No turn in the selection recorded token ids, so there is nothing token-level to "
                               "export. The local policy records them, and the openai policy against vLLM with "
                               "token_ids=true; use --format messages for the others.")
    if str(path).endswith(".parquet"):
        pa, pq = _pyarrow()
        pq.write_table(pa.Table.from_pylist(rows), str(check_output(path)))
        return len(rows)
    return _jsonl(rows, path)


def counting_unwritten_calls(trajectories: Iterable[Trajectory], tally: list[int]) -> Iterator[Trajectory]:
    """``trajectories`` unchanged, adding to ``tally[0]`` the model turns whose tool calls
    have no generated text (``written``): those are exported as native ``tool_calls``,
    which a chat template without tool support renders as nothing."""
    for t in trajectories:
        tally[0] += sum(1 for s in t.steps if s.turn is not None and s.turn.tool_calls and s.turn.written is None)
        yield t


def export(trajectories: Iterable[Trajectory], fmt: str, path: str | Path, *, system: str | None = None,
           per_request: bool = False) -> int:
    """Write ``trajectories`` in format ``fmt`` to ``path`` (``per_request``: one sample per
    model request, see the module docstring); returns the rows written."""
    if fmt not in FORMATS:
        raise errors.EnvhError(f"Unknown export format {fmt!r}. Choose one of: {', '.join(FORMATS)}")
    if per_request and fmt == "verl-rl":
        raise errors.EnvhError("--per-request does not apply to --format verl-rl: its rows are the prompts that "
                               "start episodes (one per trajectory).")
    check_output(path)
    try:
        return _write(trajectories, fmt, path, system, per_request)
    except OSError as exc:
        raise errors.EnvhError(f"Cannot write the export to {path}: {exc}") from exc


def _write(trajectories: Iterable[Trajectory], fmt: str, path: str | Path, system: str | None,
           per_request: bool) -> int:
    if fmt == "verl-rl":
        return write_verl_rl(trajectories, path, system)
    if fmt == "sft":
        return write_tokens(trajectories, path, per_request)
    writer = {"messages": write_messages, "trl": write_trl, "parquet": write_parquet, "verl": write_verl}[fmt]
    return writer(trajectories, path, system, per_request)


def default_path(run_dir: str | Path, fmt: str) -> Path:
    return Path(run_dir) / _DEFAULT_NAMES[fmt]
