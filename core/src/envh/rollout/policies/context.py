"""Fitting a conversation to a model's context: which exchanges a prompt keeps.

Strategy ``drop-oldest``: the system prompt, the first observation (it states the task;
``keep_first``) and the current observation always stay; the oldest exchanges go first
until the prompt fits the token budget (binary search: token counts only shrink as
exchanges go). When even that is too long, the current observation is cut in the middle.
A tool answer whose call was dropped becomes a user message, so every request stays one
an OpenAI-compatible server accepts. The returned ``context`` record says what happened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Turns = list[tuple[list[dict[str, Any]], dict[str, Any]]]
NOT_EXECUTED = "Not executed: one tool call per turn, and only the first call of a reply runs."
CUT = "\n[... {n} characters cut to fit the context ...]\n"


def well_formed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with orphaned tool answers turned into user text (their call was
    dropped), stubs of dropped calls removed, and adjacent user messages joined."""
    called: set[str] = set()
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant":
            called.update(c.get("id", "") for c in message.get("tool_calls") or [])
        if message.get("role") == "tool" and message.get("tool_call_id") not in called:
            if message.get("content") == NOT_EXECUTED:
                continue
            message = {"role": "user", "content": message.get("content") or ""}
        if out and message.get("role") == "user" and out[-1].get("role") == "user":
            out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n\n{message['content']}"}
            continue
        out.append(message)
    return out


def build(system: dict[str, Any], turns: Turns, lead: list[dict[str, Any]], drop: int,
          keep_first: bool) -> list[dict[str, Any]]:
    """The request with the first ``drop`` exchanges left out."""
    messages = [system]
    if drop > 0 and keep_first and turns:
        messages += [m for m in turns[0][0] if m.get("role") == "user"][:1]
    for lead_i, reply in turns[drop:]:
        messages += [*lead_i, reply]
    return well_formed(messages + lead)


def cut_middle(text: str, keep: int) -> str:
    """``text`` shortened to about ``keep`` characters, its middle replaced by a marker."""
    if len(text) <= keep:
        return text
    keep = max(keep, 0)
    head, tail = keep // 2, keep - keep // 2
    return text[:head] + CUT.format(n=len(text) - keep) + (text[-tail:] if tail else "")


def fit(system: dict[str, Any], turns: Turns, lead: list[dict[str, Any]], *, max_turns: int | None,
        keep_first: bool, budget: int | None, count: Callable[[list[dict[str, Any]]], int],
        counted_with: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The request to send and the record of how it was fitted."""
    low = 0 if max_turns is None else max(0, len(turns) - max_turns)
    record: dict[str, Any] = {"strategy": "drop-oldest" + ("+keep-first" if keep_first else ""),
                              "exchanges": len(turns), "max_turns": max_turns, "budget": budget}
    if budget is None:
        messages = build(system, turns, lead, low, keep_first)
        record.update(dropped=low)
        return messages, record
    high = len(turns)
    if high > low and count(build(system, turns, lead, low, keep_first)) > budget:
        lo, hi = low + 1, high  # the smallest drop that fits, or ``high`` (everything dropped)
        while lo < hi:
            mid = (lo + hi) // 2
            if count(build(system, turns, lead, mid, keep_first)) <= budget:
                hi = mid
            else:
                lo = mid + 1
        low = lo
    messages = build(system, turns, lead, low, keep_first)
    tokens = count(messages)
    cut = 0
    for _ in range(4):  # still too long: cut the newest observation (and the kept first one)
        if tokens <= budget:
            break
        longest = max(range(1, len(messages)), key=lambda i: len(str(messages[i].get("content") or "")),
                      default=None)
        if longest is None:
            break
        text = str(messages[longest].get("content") or "")
        keep = max(0, int(len(text) * budget / tokens) - 200)
        if keep >= len(text):
            break
        cut += len(text) - keep
        messages[longest] = {**messages[longest], "content": cut_middle(text, keep)}
        tokens = count(messages)
    record.update(dropped=low, prompt_tokens=tokens, counted_with=counted_with, cut_chars=cut,
                  fits=tokens <= budget)
    return messages, record
