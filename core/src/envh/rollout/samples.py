"""Training samples of one trajectory, built from what the model saw and said.

Two kinds, both from the turn records (``request_messages``, ``request_tools``):

* per request (``requests``): each model request exactly as sent, with its own tools and
  system message, and the reply to it. What every reply was conditioned on, nothing more.
* conversation (``conversations``): the episode as one conversation: the first request as
  sent, then each reply and the messages the next request added. When the context was
  fitted (history dropped), a reply follows more context than its request held; the
  conversation is split where the tools or the system message change, so each part has
  one tool list and one system prompt.

A reply is what the model produced as it produced it: where the server's tool parser took
the calls out of the generated text (``ModelTurn.written``), the assistant message is that
text (``<tool_call>...</tool_call>`` included) and has no ``tool_calls``; otherwise the text
and the native calls as returned.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from .trajectory import ModelTurn, Trajectory, request_messages, request_tools, tools_block


@attrs.frozen(kw_only=True)
class Sample:
    """One sample: ``messages`` ends with the reply (per request) or holds the replies of
    ``turns`` (the step indices); ``prompt`` is the number of leading messages that are
    the request (per request; 0 for a conversation); ``tools`` the schemas shown."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turns: list[int]
    prompt: int = 0


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                              "parameters": t.get("parameters") or {"type": "object"}}}
            for t in tools]


def arguments(raw: Any) -> Any:
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
    """The assistant message exactly as the model produced it: the generated text where the
    server's tool parser took calls out of it (``written``), else the text and the native
    calls (``raw_arguments``: each call's arguments as the string the model wrote, else as
    a mapping where it is one)."""
    if turn.written is not None:
        return {"role": "assistant", "content": turn.prefill + turn.written}
    message: dict[str, Any] = {"role": "assistant", "content": turn.prefill + (turn.text or "")}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c.get("name"),
                          "arguments": c.get("arguments") if raw_arguments else arguments(c.get("arguments"))}}
            for c in turn.tool_calls]
    return message


def clean(message: dict[str, Any]) -> dict[str, Any]:
    """A request message as templates take it: no null fields, call arguments as mappings."""
    out = {k: v for k, v in message.items() if v is not None}
    out["content"] = message.get("content") or ""
    if "tool_calls" in out:
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": arguments(c["function"]["arguments"])}}
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


def _with_system(messages: list[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
    if system and messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": system}, *messages[1:]]
    return messages


def _turns(trajectory: Trajectory) -> list[tuple[int, ModelTurn, list[dict[str, Any]], list[dict[str, Any]] | None]]:
    """(step index, turn, request as sent, tools sent) for each step with a recorded turn."""
    steps = trajectory.steps
    return [(s.index, s.turn, r, tl) for s, r, tl in zip(steps, request_messages(steps), request_tools(steps),
                                                          strict=True) if s.turn is not None and r is not None]


def _conversation(turns: list[tuple[int, ModelTurn, list[dict[str, Any]], Any]], first: Any,
                  raw_arguments: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for _index, turn, request, _tools in turns:
        messages += [clean(m) for m in (request if not messages else _new_messages(request, first))]
        messages.append(reply_message(turn, raw_arguments))
    return messages


def _first_observation(request: list[dict[str, Any]]) -> Any:
    return next((m.get("content") for m in request if m.get("role") == "user"), None)


def to_messages(trajectory: Trajectory, system: str | None = None, raw_arguments: bool = False) -> list[dict[str, Any]]:
    """The whole episode as one conversation (see the module docstring), unsplit."""
    turns = _turns(trajectory)
    if not turns:
        return _from_actions(trajectory, system)
    return _with_system(_conversation(turns, _first_observation(turns[0][2]), raw_arguments), system)


def _system_of(request: list[dict[str, Any]]) -> Any:
    return request[0].get("content") if request and request[0].get("role") == "system" else None


def conversations(trajectory: Trajectory, system: str | None = None, raw_arguments: bool = False) -> list[Sample]:
    """The episode as conversations, split where the tools or the system message sent change."""
    turns = _turns(trajectory)
    if not turns:
        return [Sample(messages=_from_actions(trajectory, system), tools=openai_tools(trajectory.tools),
                       turns=[s.index for s in trajectory.steps])]
    first = _first_observation(turns[0][2])
    parts: list[list[Any]] = []
    for item in turns:
        if not parts or (item[3], _system_of(item[2])) != (parts[-1][-1][3], _system_of(parts[-1][-1][2])):
            parts.append([])
        parts[-1].append(item)
    fallback = tools_block(trajectory.steps) or openai_tools(trajectory.tools)
    return [Sample(messages=_with_system(_conversation(part, first, raw_arguments), system),
                   tools=part[0][3] if part[0][3] is not None else fallback, turns=[i for i, *_ in part])
            for part in parts]


def requests(trajectory: Trajectory, system: str | None = None, raw_arguments: bool = False) -> list[Sample]:
    """One sample per model request: the messages exactly as sent (``system`` replaces the
    system message), its tools (``[]`` where it sent none) and the reply. A trajectory
    without recorded turns gives one sample per action of its action conversation."""
    turns = _turns(trajectory)
    if not turns:
        messages = _from_actions(trajectory, system)
        ends = [n for n, m in enumerate(messages) if m["role"] == "assistant"]
        return [Sample(messages=messages[:n + 1], tools=openai_tools(trajectory.tools), turns=[step.index], prompt=n)
                for n, step in zip(ends, trajectory.steps, strict=False)]
    return [Sample(messages=[*_with_system([clean(m) for m in request], system), reply_message(turn, raw_arguments)],
                   tools=tools or [], turns=[index], prompt=len(request))
            for index, turn, request, tools in turns]


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
    """The tool schemas the model was shown last (from the turns), else the env's tools."""
    return tools_block(trajectory.steps) or openai_tools(trajectory.tools)
