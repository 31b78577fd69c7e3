"""Recorded LLM replies for ``envh.testing_llm.LLMReplayServer``.

A ``Reply`` is one answer of the replay server: a text message, function calls, an HTTP
error, a verbatim response body, optionally after a delay. Helpers build the common
cases; ``load_replies`` reads a recording from a JSON or JSONL file, where each entry is
either the fields of a ``Reply`` or a verbatim OpenAI chat-completion body.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

_FIELDS = {"content", "tool_calls", "status", "error", "body", "delay_s", "finish_reason", "usage"}


@attrs.frozen(kw_only=True)
class Reply:
    """One answer of the replay server.

    :param content: the assistant message text (may be malformed on purpose).
    :param tool_calls: ``[{"name": ..., "arguments": dict or raw JSON string, "id": ...}]``;
        a string ``arguments`` is sent verbatim, so broken JSON can be replayed.
    :param status: HTTP status; anything but 200 answers an OpenAI-style error body.
    :param error: the error message for a non-200 status.
    :param body: a verbatim JSON body to answer instead of building one.
    :param delay_s: wait this long before answering (timeouts, concurrency).
    :param finish_reason: defaults to ``tool_calls`` or ``stop``.
    :param usage: token usage to report; estimated from word counts if omitted.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] = attrs.field(factory=list)
    status: int = 200
    error: str | None = None
    body: Any = None
    delay_s: float = 0.0
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


def text_reply(content: str, **kwargs: Any) -> Reply:
    """An assistant message with ``content`` and no tool call."""
    return Reply(content=content, **kwargs)


def tool_reply(name: str, arguments: dict[str, Any] | str | None = None, *, content: str | None = None,
               call_id: str | None = None, **kwargs: Any) -> Reply:
    """A native function call; pass ``arguments`` as a string to send broken JSON."""
    call: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if call_id:
        call["id"] = call_id
    return Reply(content=content, tool_calls=[call], **kwargs)


def error_reply(status: int = 500, message: str | None = None, **kwargs: Any) -> Reply:
    """An HTTP error (500s and 429s exercise retries, 4xx fail at once)."""
    return Reply(status=status, error=message, **kwargs)


def slow(reply: Reply, delay_s: float) -> Reply:
    """``reply``, answered after ``delay_s`` seconds."""
    return attrs.evolve(reply, delay_s=delay_s)


def reply_from_data(data: dict[str, Any]) -> Reply:
    """A ``Reply`` from its fields, or from a verbatim chat-completion body."""
    if "choices" in data:
        return Reply(body=data)
    unknown = set(data) - _FIELDS
    if unknown:
        raise ValueError(f"Unknown reply fields {sorted(unknown)}; expected some of {sorted(_FIELDS)} "
                         "or a chat-completion body with 'choices'")
    return Reply(**data)


def load_replies(path: str | Path) -> list[Reply]:
    """Read replies from a ``.json`` list or a ``.jsonl`` file (one reply per line)."""
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".jsonl"):
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        items = json.loads(text)
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a JSON list of replies")
    return [reply_from_data(item) for item in items]
